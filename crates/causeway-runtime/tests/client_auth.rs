//! The native client port with a password: the right password opens a session, a wrong
//! or missing one is refused with a clear reason (as RESP's AUTH does).

use causeway_client::{Client, ClientError, Options};
use causeway_runtime::config::{local_cluster, ClusterConfig};
use causeway_runtime::Server;
use std::net::SocketAddr;

const PASSWORD: &str = "native-client-password";

fn free_addr() -> SocketAddr {
    let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    l.local_addr().unwrap()
}

fn cluster(dir: &std::path::Path) -> ClusterConfig {
    let mut c = local_cluster("eventual", 1, 1, dir.to_path_buf(), 7100, 7000).unwrap();
    c.nodes[0].addr = free_addr();
    c.nodes[0].client_addr = Some(free_addr());
    c.nodes[0].resp_addr = None;
    c.password = Some(PASSWORD.into());
    c.secret = Some("client-auth-test-secret-0123".into());
    c.validate().unwrap();
    c
}

fn connect(addr: SocketAddr, password: Option<&str>) -> Result<Client, ClientError> {
    let options = Options {
        connect_timeout_ms: 5_000,
        password: password.map(Into::into),
        ..Options::default()
    };
    Client::connect_with(addr, options)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_right_password_opens_a_session_and_a_wrong_or_missing_one_is_refused() {
    let dir = std::env::temp_dir().join(format!("cw-client-auth-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    let config = cluster(&dir);
    let server = Server::start(&config, &config.nodes[0].name).await.unwrap();
    let addr = config.nodes[0].client_addr.unwrap();
    let outcome = tokio::task::spawn_blocking(move || {
        let mut client = connect(addr, Some(PASSWORD)).expect("the right password");
        client.begin().unwrap();
        client.set("k", b"v".to_vec()).unwrap();
        client.commit().unwrap();
        client.begin().unwrap();
        assert_eq!(client.get("k").unwrap(), Some(b"v".to_vec()));
        client.commit().unwrap();
        let wrong = connect(addr, Some("native-client-passworD")).err();
        let missing = connect(addr, None).err();
        (wrong, missing)
    })
    .await
    .unwrap();
    match outcome {
        (Some(ClientError::Refused(wrong)), Some(ClientError::Refused(missing))) => {
            assert!(wrong.starts_with("WRONGPASS"), "{wrong}");
            assert!(missing.starts_with("NOAUTH"), "{missing}");
        }
        other => panic!("a wrong and a missing password must be refused: {other:?}"),
    }
    drop(server);
    let _ = std::fs::remove_dir_all(&dir);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_idle_native_client_connection_is_closed() {
    let dir = std::env::temp_dir().join(format!("cw-client-idle-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    let mut config = cluster(&dir);
    config.limits.client_idle_timeout_ms = 300;
    config.validate().unwrap();
    let server = Server::start(&config, &config.nodes[0].name).await.unwrap();
    let addr = config.nodes[0].client_addr.unwrap();
    let after_idle = tokio::task::spawn_blocking(move || {
        let mut client = connect(addr, Some(PASSWORD)).unwrap();
        for _ in 0..4 {
            std::thread::sleep(std::time::Duration::from_millis(100));
            client.begin().expect("a busy connection stays open");
            client.commit().unwrap();
        }
        std::thread::sleep(std::time::Duration::from_millis(900));
        client.begin().err()
    })
    .await
    .unwrap();
    assert!(
        matches!(after_idle, Some(ClientError::ConnectionLost(_))),
        "{after_idle:?}"
    );
    drop(server);
    let _ = std::fs::remove_dir_all(&dir);
}
