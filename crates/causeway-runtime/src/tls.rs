//! Optional TLS (rustls, ring provider) on node links and on the client and RESP ports:
//! loading the cluster file's `[tls]` files into acceptors and connectors, the stream type
//! the transport and the gateway read and write whether or not TLS is on, and the
//! throwaway CA `causeway up --tls` generates.
//!
//! Decisions (docs/OPERATIONS.md, "Security"): one CA per cluster; node links are mutual
//! TLS (each end presents a certificate of that CA, and the cluster secret's
//! challenge-response still runs inside), client and RESP ports authenticate the server
//! only (clients prove themselves with the password). A dialing node checks the listener's
//! certificate against the address it dials (an IP SAN, or `server_name` when the
//! certificates name hosts instead).

use crate::config::TlsConfig;
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer, ServerName};
use std::io;
use std::path::Path;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Duration;
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::net::TcpStream;
use tokio_rustls::{TlsAcceptor, TlsConnector};

/// Most bytes of a certificate, key or CA file.
pub const PEM_FILE_BYTES_MAX: u64 = 1 << 20;
/// Longest a TLS handshake may take before the connection is dropped.
pub const HANDSHAKE_TIMEOUT_MS: u64 = 10_000;

/// What a node needs to speak TLS: acceptors for its listeners, a connector for its links.
#[derive(Clone)]
pub struct Tls {
    /// Client and RESP ports: server authentication only.
    pub clients: TlsAcceptor,
    /// The same, as the RESP front end takes it.
    pub clients_config: Arc<rustls::ServerConfig>,
    /// The node-to-node listener: the dialer must present a certificate of the CA.
    pub peers: TlsAcceptor,
    /// Dialing a peer: checks its certificate, presents ours.
    pub dialer: TlsConnector,
    /// The name checked against a peer's certificate (`None`: the dialed IP address).
    pub server_name: Option<String>,
}

impl std::fmt::Debug for Tls {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Tls")
            .field("server_name", &self.server_name)
            .finish_non_exhaustive()
    }
}

fn provider() -> Arc<rustls::crypto::CryptoProvider> {
    Arc::new(rustls::crypto::ring::default_provider())
}

fn read_pem(what: &str, path: &Path) -> Result<Vec<u8>, String> {
    let fail = |e: String| format!("tls.{what}: {}: {e}", path.display());
    let len = std::fs::metadata(path)
        .map_err(|e| fail(e.to_string()))?
        .len();
    if len > PEM_FILE_BYTES_MAX {
        return Err(fail(format!("{len} bytes, more than {PEM_FILE_BYTES_MAX}")));
    }
    std::fs::read(path).map_err(|e| fail(e.to_string()))
}

/// The certificates of a PEM file (at least one).
pub fn load_certs(what: &str, path: &Path) -> Result<Vec<CertificateDer<'static>>, String> {
    let pem = read_pem(what, path)?;
    let certs = CertificateDer::pem_slice_iter(&pem)
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| format!("tls.{what}: {}: {e}", path.display()))?;
    if certs.is_empty() {
        return Err(format!(
            "tls.{what}: {} holds no certificate",
            path.display()
        ));
    }
    Ok(certs)
}

fn load_key(path: &Path) -> Result<PrivateKeyDer<'static>, String> {
    let pem = read_pem("key_file", path)?;
    PrivateKeyDer::from_pem_slice(&pem)
        .map_err(|e| format!("tls.key_file: {}: no private key: {e}", path.display()))
}

/// A root store holding the CA file's certificates.
pub fn roots(ca_file: &Path) -> Result<Arc<rustls::RootCertStore>, String> {
    let mut roots = rustls::RootCertStore::empty();
    for cert in load_certs("ca_file", ca_file)? {
        roots
            .add(cert)
            .map_err(|e| format!("tls.ca_file: {}: {e}", ca_file.display()))?;
    }
    Ok(Arc::new(roots))
}

impl Tls {
    /// Loads the cluster file's `[tls]` files; every error names the field and the file.
    pub fn load(config: &TlsConfig) -> Result<Tls, String> {
        let certs = load_certs("cert_file", &config.cert_file)?;
        let key = load_key(&config.key_file)?;
        let roots = roots(&config.ca_file)?;
        let tls_err = |e: rustls::Error| format!("tls: {e}");
        let server = rustls::ServerConfig::builder_with_provider(provider())
            .with_safe_default_protocol_versions()
            .map_err(tls_err)?
            .with_no_client_auth()
            .with_single_cert(certs.clone(), key.clone_key())
            .map_err(tls_err)?;
        let verifier =
            rustls::server::WebPkiClientVerifier::builder_with_provider(roots.clone(), provider())
                .build()
                .map_err(|e| format!("tls.ca_file: {e}"))?;
        let mutual = rustls::ServerConfig::builder_with_provider(provider())
            .with_safe_default_protocol_versions()
            .map_err(tls_err)?
            .with_client_cert_verifier(verifier)
            .with_single_cert(certs.clone(), key.clone_key())
            .map_err(tls_err)?;
        let dialer = rustls::ClientConfig::builder_with_provider(provider())
            .with_safe_default_protocol_versions()
            .map_err(tls_err)?
            .with_root_certificates(roots)
            .with_client_auth_cert(certs, key)
            .map_err(tls_err)?;
        let server = Arc::new(server);
        Ok(Tls {
            clients: TlsAcceptor::from(server.clone()),
            clients_config: server,
            peers: TlsAcceptor::from(Arc::new(mutual)),
            dialer: TlsConnector::from(Arc::new(dialer)),
            server_name: config.server_name.clone(),
        })
    }

    /// The name a dialed peer's certificate must carry.
    pub fn name_of(&self, addr: std::net::SocketAddr) -> Result<ServerName<'static>, String> {
        match &self.server_name {
            Some(name) => ServerName::try_from(name.clone())
                .map_err(|e| format!("tls.server_name {name:?}: {e}")),
            None => Ok(ServerName::IpAddress(addr.ip().into())),
        }
    }
}

fn timed_out(what: &str) -> io::Error {
    io::Error::new(
        io::ErrorKind::TimedOut,
        format!("no TLS {what} within {HANDSHAKE_TIMEOUT_MS} ms"),
    )
}

/// Runs the server side of a handshake on `tcp` with `acceptor`, within
/// [`HANDSHAKE_TIMEOUT_MS`].
pub async fn accept(acceptor: &TlsAcceptor, tcp: TcpStream) -> io::Result<Stream> {
    let limit = Duration::from_millis(HANDSHAKE_TIMEOUT_MS);
    match tokio::time::timeout(limit, acceptor.accept(tcp)).await {
        Ok(tls) => Ok(Stream::Tls(Box::new(tls?.into()))),
        Err(_) => Err(timed_out("handshake from the client")),
    }
}

/// Runs the client side of a handshake to the peer at `addr`.
pub async fn connect(tls: &Tls, addr: std::net::SocketAddr, tcp: TcpStream) -> io::Result<Stream> {
    let name = tls.name_of(addr).map_err(io::Error::other)?;
    let limit = Duration::from_millis(HANDSHAKE_TIMEOUT_MS);
    match tokio::time::timeout(limit, tls.dialer.connect(name, tcp)).await {
        Ok(s) => Ok(Stream::Tls(Box::new(s?.into()))),
        Err(_) => Err(timed_out("handshake with the peer")),
    }
}

/// A connection with or without TLS. Plain TCP stays a bare `TcpStream` underneath, so a
/// cluster without TLS pays one `match` per read or write.
pub enum Stream {
    Plain(TcpStream),
    Tls(Box<tokio_rustls::TlsStream<TcpStream>>),
}

impl Stream {
    /// The TCP socket underneath (for its options and addresses).
    pub fn tcp(&self) -> &TcpStream {
        match self {
            Stream::Plain(s) => s,
            Stream::Tls(s) => s.get_ref().0,
        }
    }
}

impl AsyncRead for Stream {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        match self.get_mut() {
            Stream::Plain(s) => Pin::new(s).poll_read(cx, buf),
            Stream::Tls(s) => Pin::new(s.as_mut()).poll_read(cx, buf),
        }
    }
}

impl AsyncWrite for Stream {
    fn poll_write(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        match self.get_mut() {
            Stream::Plain(s) => Pin::new(s).poll_write(cx, buf),
            Stream::Tls(s) => Pin::new(s.as_mut()).poll_write(cx, buf),
        }
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        match self.get_mut() {
            Stream::Plain(s) => Pin::new(s).poll_flush(cx),
            Stream::Tls(s) => Pin::new(s.as_mut()).poll_flush(cx),
        }
    }

    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        match self.get_mut() {
            Stream::Plain(s) => Pin::new(s).poll_shutdown(cx),
            Stream::Tls(s) => Pin::new(s.as_mut()).poll_shutdown(cx),
        }
    }
}

/// The files of a generated throwaway CA and of the one certificate every node of a local
/// cluster presents (SANs `localhost` and `127.0.0.1`).
pub struct Generated {
    pub ca_file: std::path::PathBuf,
    pub cert_file: std::path::PathBuf,
    pub key_file: std::path::PathBuf,
}

/// Generates a throwaway CA and a node certificate signed by it into `dir` (keys mode
/// 0600). For `causeway up --tls` and tests: a real deployment brings its own CA.
pub fn generate_throwaway(dir: &Path) -> Result<Generated, String> {
    use rcgen::{BasicConstraints, CertificateParams, DnType, IsCa, Issuer, KeyPair};
    use rcgen::{ExtendedKeyUsagePurpose as Eku, KeyUsagePurpose as Ku};
    let err = |e: rcgen::Error| format!("generating the throwaway CA: {e}");
    let mut ca = CertificateParams::new(Vec::<String>::new()).map_err(err)?;
    ca.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    ca.distinguished_name
        .push(DnType::CommonName, "causeway up throwaway CA");
    ca.key_usages = vec![Ku::KeyCertSign, Ku::CrlSign, Ku::DigitalSignature];
    let ca_key = KeyPair::generate().map_err(err)?;
    let ca_cert = ca.self_signed(&ca_key).map_err(err)?;
    let issuer = Issuer::new(ca, ca_key);
    let names = vec!["localhost".to_string(), "127.0.0.1".to_string()];
    let mut leaf = CertificateParams::new(names).map_err(err)?;
    leaf.distinguished_name
        .push(DnType::CommonName, "causeway node");
    leaf.use_authority_key_identifier_extension = true;
    leaf.key_usages = vec![Ku::DigitalSignature, Ku::KeyEncipherment];
    leaf.extended_key_usages = vec![Eku::ServerAuth, Eku::ClientAuth];
    let leaf_key = KeyPair::generate().map_err(err)?;
    let leaf_cert = leaf.signed_by(&leaf_key, &issuer).map_err(err)?;
    std::fs::create_dir_all(dir).map_err(|e| format!("{}: {e}", dir.display()))?;
    let files = Generated {
        ca_file: dir.join("ca.pem"),
        cert_file: dir.join("node.pem"),
        key_file: dir.join("node.key"),
    };
    write_file(&files.ca_file, &ca_cert.pem(), false)?;
    write_file(&files.cert_file, &leaf_cert.pem(), false)?;
    write_file(&files.key_file, &leaf_key.serialize_pem(), true)?;
    Ok(files)
}

/// Writes `text` to `path`, mode 0600 when `secret` (keys), else 0644.
pub(crate) fn write_file(path: &Path, text: &str, secret: bool) -> Result<(), String> {
    use std::io::Write;
    use std::os::unix::fs::OpenOptionsExt;
    let mode = if secret { 0o600 } else { 0o644 };
    let mut f = std::fs::OpenOptions::new()
        .write(true)
        .create(true)
        .truncate(true)
        .mode(mode)
        .open(path)
        .map_err(|e| format!("{}: {e}", path.display()))?;
    f.write_all(text.as_bytes())
        .map_err(|e| format!("{}: {e}", path.display()))
}

#[cfg(test)]
mod tests {
    use super::*;
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    use tokio::net::TcpListener;

    fn config(dir: &Path) -> TlsConfig {
        let g = generate_throwaway(dir).expect("generate");
        TlsConfig {
            cert_file: g.cert_file,
            key_file: g.key_file,
            ca_file: g.ca_file,
            server_name: None,
        }
    }

    fn temp(name: &str) -> std::path::PathBuf {
        let dir = std::env::temp_dir().join(format!("causeway-tls-{name}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        dir
    }

    #[tokio::test]
    async fn two_nodes_of_one_ca_talk_over_mutual_tls() {
        let tls = Tls::load(&config(&temp("mutual"))).expect("load");
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let acceptor = tls.peers.clone();
        let server = tokio::spawn(async move {
            let (tcp, _) = listener.accept().await.unwrap();
            let mut s = accept(&acceptor, tcp).await.expect("accept");
            let mut buf = [0u8; 5];
            s.read_exact(&mut buf).await.unwrap();
            s.write_all(&buf).await.unwrap();
            s.flush().await.unwrap();
        });
        let tcp = TcpStream::connect(addr).await.unwrap();
        let mut s = connect(&tls, addr, tcp).await.expect("connect");
        assert!(matches!(s, Stream::Tls(_)));
        s.write_all(b"hello").await.unwrap();
        s.flush().await.unwrap();
        let mut back = [0u8; 5];
        s.read_exact(&mut back).await.unwrap();
        assert_eq!(&back, b"hello");
        server.await.unwrap();
    }

    #[tokio::test]
    async fn a_node_of_another_ca_is_refused_on_the_peer_port() {
        let ours = Tls::load(&config(&temp("ours"))).expect("load");
        let theirs = Tls::load(&config(&temp("theirs"))).expect("load");
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let acceptor = ours.peers.clone();
        let server = tokio::spawn(async move {
            let (tcp, _) = listener.accept().await.unwrap();
            accept(&acceptor, tcp).await.map(|_| ())
        });
        let tcp = TcpStream::connect(addr).await.unwrap();
        let dialed = connect(&theirs, addr, tcp).await;
        assert!(dialed.is_err(), "their CA does not sign our certificate");
        assert!(server.await.unwrap().is_err(), "nor ours theirs");
    }

    #[test]
    fn missing_and_empty_files_are_named_in_the_error() {
        let dir = temp("bad");
        let mut c = config(&dir);
        c.ca_file = dir.join("nope.pem");
        let e = Tls::load(&c).expect_err("missing ca");
        assert!(e.contains("tls.ca_file") && e.contains("nope.pem"), "{e}");
        std::fs::write(dir.join("empty.pem"), "").unwrap();
        c.ca_file = dir.join("empty.pem");
        let e = Tls::load(&c).expect_err("empty ca");
        assert!(e.contains("holds no certificate"), "{e}");
    }
}
