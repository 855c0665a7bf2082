//! Nothing before authentication costs memory (issue 75) on the native client port of a
//! real node: 1,000 connections that never authenticate grow its peak RSS by less than
//! 64 MiB, a 2 MB Hello is refused at its length, and an authenticated client is served
//! meanwhile.

mod common;
use common::*;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn unauthenticated_connections_to_the_native_port_cost_little() {
    let dir = std::env::temp_dir().join(format!("cw-preauth-native-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    let config = cluster(&dir);
    let server = Server::start(&config, &config.nodes[0].name).await.unwrap();
    let client_addr = config.nodes[0].client_addr.unwrap();
    tokio::task::spawn_blocking(move || served(client_addr, b"warm"))
        .await
        .unwrap();
    let (growth_kib, answers) = phase(client_addr, client_addr).await;
    eprintln!("native port: peak RSS grew by {growth_kib} KiB");
    assert!(growth_kib < RSS_GROWTH_KIB_MAX, "native: {growth_kib} KiB");
    let large = text(&answers[SMALL_SENDERS]);
    assert!(
        large.contains("a Hello of 2000000 bytes: before authentication a frame is at most 4096"),
        "{large:?}"
    );
    drop(server);
    let _ = std::fs::remove_dir_all(&dir);
}
