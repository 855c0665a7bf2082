//! Nothing before authentication costs memory (issue 75) on the peer port of a real
//! node: 1,000 connections that never authenticate grow its peak RSS by less than 64 MiB,
//! a 2 MB handshake frame is refused at its length, and an authenticated client is served
//! meanwhile.

mod common;
use common::*;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn unauthenticated_connections_to_the_peer_port_cost_little() {
    let dir = std::env::temp_dir().join(format!("cw-preauth-peer-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    let config = cluster(&dir);
    let server = Server::start(&config, &config.nodes[0].name).await.unwrap();
    let client_addr = config.nodes[0].client_addr.unwrap();
    let peer_addr = config.nodes[0].addr;
    tokio::task::spawn_blocking(move || served(client_addr, b"warm"))
        .await
        .unwrap();
    let (growth_kib, answers) = phase(peer_addr, client_addr).await;
    eprintln!("peer port: peak RSS grew by {growth_kib} KiB");
    assert!(growth_kib < RSS_GROWTH_KIB_MAX, "peer: {growth_kib} KiB");
    let large = text(&answers[SMALL_SENDERS]);
    assert!(
        large.contains("a handshake frame over 4096 bytes"),
        "{large:?}"
    );
    let small = text(&answers[0]);
    assert!(small.contains("undecodable"), "{small:?}");
    drop(server);
    let _ = std::fs::remove_dir_all(&dir);
}
