//! Per-node keyrings: the keys of one node's links, so a node cannot claim another's id.
//!
//! With a cluster secret in the cluster file every node can derive every link key
//! ([`auth::link_key`]), so whoever reads one node's files can pose as any node. A keyring
//! holds only the keys of its node's own links: `causeway keyring` derives them from the
//! secret ([`write_all`]) into one file per node, `DIR/<node name>.keyring` (mode 0600);
//! each host gets its own file, the cluster file names the directory (`keyring_dir`) and
//! holds no secret. A node then loads its file ([`load`]) and proves each link with that
//! link's key; an attacker holding node a's keyring can prove a's id and no other, because
//! the link from c to b has a key a never had.
//!
//! The file is TOML: `cluster`, `node`, and `[links]`, one `peer name = "64 hex digits"`
//! per other node of the cluster file. Loading checks the cluster and node names, that
//! every peer of the cluster file has a key, and no more than `KEYRING_BYTES_MAX` bytes.

use crate::auth::{self, Keys, LinkKey, LINK_KEY_LEN};
use crate::config::ClusterConfig;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;

/// Most bytes of a keyring file (a key is about 80 bytes; 256 nodes fit many times over).
pub const KEYRING_BYTES_MAX: u64 = 1 << 20;

/// A keyring file as written and read.
#[derive(Serialize, Deserialize)]
struct KeyringFile {
    cluster: String,
    node: String,
    /// Peer node name to the hex key of the link with it.
    links: BTreeMap<String, String>,
}

/// Where node `name`'s keyring lives in `dir`.
pub fn path_of(dir: &Path, name: &str) -> PathBuf {
    dir.join(format!("{name}.keyring"))
}

/// Writes the keyring of every node of `config` into `dir`, derived from `secret`; returns
/// the files written.
pub fn write_all(
    config: &ClusterConfig,
    secret: &[u8],
    dir: &Path,
) -> Result<Vec<PathBuf>, String> {
    std::fs::create_dir_all(dir).map_err(|e| format!("{}: {e}", dir.display()))?;
    let placements = config.placements();
    let mut written = Vec::with_capacity(placements.len());
    for me in &placements {
        let links = placements
            .iter()
            .filter(|p| p.id != me.id)
            .map(|p| {
                let key = auth::link_key(secret, &config.cluster, me.id.0, p.id.0);
                (p.spec.name.clone(), hex(&key))
            })
            .collect();
        let file = KeyringFile {
            cluster: config.cluster.clone(),
            node: me.spec.name.clone(),
            links,
        };
        let body = toml::to_string(&file).map_err(|e| e.to_string())?;
        let text = format!(
            "# The keyring of node \"{}\" of cluster \"{}\" (`causeway keyring`): the keys of \
             its links.\n# Keep it secret: copy it to that node's host only.\n{body}",
            me.spec.name, config.cluster
        );
        let path = path_of(dir, &me.spec.name);
        crate::tls::write_file(&path, &text, true)?;
        written.push(path);
    }
    Ok(written)
}

/// Loads node `name`'s keyring from `dir` for `config`: the keys of its links by peer id.
pub fn load(config: &ClusterConfig, dir: &Path, name: &str) -> Result<Keys, String> {
    let path = path_of(dir, name);
    let shown = path.display();
    let len = std::fs::metadata(&path)
        .map_err(|e| {
            format!(
                "keyring {shown}: {e}; fix: run `causeway keyring` and copy the node's file there"
            )
        })?
        .len();
    if len > KEYRING_BYTES_MAX {
        return Err(format!(
            "keyring {shown}: {len} bytes, more than {KEYRING_BYTES_MAX}"
        ));
    }
    let text = std::fs::read_to_string(&path).map_err(|e| format!("keyring {shown}: {e}"))?;
    let file: KeyringFile = toml::from_str(&text).map_err(|e| format!("keyring {shown}: {e}"))?;
    if file.cluster != config.cluster || file.node != name {
        return Err(format!(
            "keyring {shown} is node \"{}\"'s of cluster \"{}\", not \"{name}\"'s of \"{}\"",
            file.node, file.cluster, config.cluster
        ));
    }
    let mut ring = BTreeMap::new();
    for p in config.placements().iter().filter(|p| p.spec.name != name) {
        let hex_key = file.links.get(&p.spec.name).ok_or_else(|| {
            format!(
                "keyring {shown} has no key for node \"{}\"; fix: run `causeway keyring` again \
                 after changing the cluster's nodes",
                p.spec.name
            )
        })?;
        let key = unhex(hex_key).ok_or_else(|| {
            format!(
                "keyring {shown}: the key for \"{}\" is not 64 hex digits",
                p.spec.name
            )
        })?;
        ring.insert(p.id.0, key);
    }
    Ok(Keys::Ring(Arc::new(ring)))
}

fn hex(key: &LinkKey) -> String {
    key.iter().map(|b| format!("{b:02x}")).collect()
}

fn unhex(text: &str) -> Option<LinkKey> {
    if text.len() != 2 * LINK_KEY_LEN || !text.is_ascii() {
        return None;
    }
    let mut key = [0u8; LINK_KEY_LEN];
    for (i, byte) in key.iter_mut().enumerate() {
        *byte = u8::from_str_radix(&text[2 * i..2 * i + 2], 16).ok()?;
    }
    Some(key)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::local_cluster;

    fn local() -> ClusterConfig {
        local_cluster("eventual", 3, 2, "/tmp/x".into(), 7100, 7000).unwrap()
    }

    fn scratch(tag: &str) -> PathBuf {
        let dir = std::env::temp_dir().join(format!("cw-keyring-{tag}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        dir
    }

    #[test]
    fn every_node_gets_the_keys_of_its_links_and_no_other() {
        let config = local();
        let dir = scratch("all");
        let files = write_all(&config, b"0123456789abcdef-secret", &dir).unwrap();
        let placements = config.placements();
        assert_eq!(files.len(), placements.len());
        let all = Keys::Secret(Arc::from(&b"0123456789abcdef-secret"[..]));
        for me in &placements {
            let ring = load(&config, &dir, &me.spec.name).unwrap();
            for p in &placements {
                let want = (p.id != me.id).then(|| all.link(&config.cluster, me.id.0, p.id.0));
                assert_eq!(ring.link(&config.cluster, me.id.0, p.id.0), want.flatten());
            }
            let text = std::fs::read_to_string(path_of(&dir, &me.spec.name)).unwrap();
            assert!(
                !text.contains("0123456789abcdef-secret"),
                "no secret in a keyring"
            );
        }
        use std::os::unix::fs::PermissionsExt;
        let mode = std::fs::metadata(&files[0]).unwrap().permissions().mode();
        assert_eq!(mode & 0o777, 0o600);
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn a_keyring_of_another_node_or_with_a_missing_or_bad_key_is_refused() {
        let config = local();
        let dir = scratch("bad");
        write_all(&config, b"0123456789abcdef-secret", &dir).unwrap();
        let names: Vec<String> = config.nodes.iter().map(|n| n.name.clone()).collect();
        let (a, b) = (&names[0], &names[1]);
        std::fs::copy(path_of(&dir, b), path_of(&dir, a)).unwrap();
        let e = load(&config, &dir, a).unwrap_err();
        assert!(e.contains(&format!("node \"{b}\"'s")), "{e}");
        write_all(&config, b"0123456789abcdef-secret", &dir).unwrap();
        let path = path_of(&dir, a);
        let text = std::fs::read_to_string(&path).unwrap();
        let cut: String = text
            .lines()
            .filter(|l| !l.starts_with(b.as_str()))
            .map(|l| format!("{l}\n"))
            .collect();
        std::fs::write(&path, cut).unwrap();
        let e = load(&config, &dir, a).unwrap_err();
        assert!(e.contains(&format!("no key for node \"{b}\"")), "{e}");
        let bad = text.replacen(&format!("{b} = \""), &format!("{b} = \"zz"), 1);
        assert_ne!(bad, text);
        std::fs::write(&path, bad).unwrap();
        assert!(load(&config, &dir, a)
            .unwrap_err()
            .contains("64 hex digits"));
        let e = load(&config, &scratch("none"), a).unwrap_err();
        assert!(e.contains("causeway keyring"), "{e}");
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
