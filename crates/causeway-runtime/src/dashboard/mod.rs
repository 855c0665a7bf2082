//! The live cluster page: served by `causeway up` (and by any node whose cluster file entry
//! has an `http_addr`), it scrapes every node's `metrics_addr` once a [`SCRAPE_INTERVAL`]
//! ([`scrape`]), keeps the recent figures ([`board`]) and answers, read-only:
//!
//! - `GET /` the page (`assets/index.html`, `style.css`, `app.js`: hand-written, embedded
//!   in the binary, no third-party code; the charts are drawn on `<canvas>` by `app.js`);
//! - `GET /api/cluster[?points=N]` the JSON of [`api::ClusterView`]: topology, node
//!   states, each DC's series (what the page and `causeway top` show).
//!
//! Nothing here writes to the cluster, and nothing assumes a protocol: the page charts
//! the stable-vector lag and the remote visibility when the protocol reports the
//! `gss_lag` and `remote_visibility` samples, and says so when it does not.

pub mod api;
pub mod board;
pub mod scrape;

use crate::metrics_http::{self, Answer, Routes};
use crate::ClusterConfig;
use board::Board;
use std::sync::{Arc, Mutex};
use std::time::{Duration, SystemTime, UNIX_EPOCH};
use tokio::net::TcpListener;

/// Time between two scrapes of every node.
pub const SCRAPE_INTERVAL: Duration = Duration::from_secs(1);

const INDEX_HTML: &str = include_str!("assets/index.html");
const STYLE_CSS: &str = include_str!("assets/style.css");
const APP_JS: &str = include_str!("assets/app.js");

/// Scrapes the nodes of `config` and serves the page and its API on `listener`, forever;
/// a client of another protocol is told `elsewhere` (`metrics_http::elsewhere`).
pub async fn serve(listener: TcpListener, config: ClusterConfig, elsewhere: Arc<str>) {
    let interval_ms = SCRAPE_INTERVAL.as_millis() as u64;
    let board = Arc::new(Mutex::new(Board::new(&config, interval_ms)));
    let serving = metrics_http::serve_routes(listener, routes(board.clone()), elsewhere);
    tokio::join!(scrape_forever(board), serving);
}

/// Unix time in ms.
pub fn now_ms() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as u64)
}

fn routes(board: Arc<Mutex<Board>>) -> Routes {
    Arc::new(move |path, query| {
        let (content_type, body) = match path {
            "/" | "/index.html" => ("text/html; charset=utf-8", INDEX_HTML.to_string()),
            "/style.css" => ("text/css; charset=utf-8", STYLE_CSS.to_string()),
            "/app.js" => ("text/javascript; charset=utf-8", APP_JS.to_string()),
            "/api/cluster" => {
                let points = api::points_wanted(query, board::POINTS_MAX);
                let view = board.lock().expect("board lock").view(now_ms(), points);
                let json = serde_json::to_string(&view).expect("the view serializes");
                ("application/json", json)
            }
            _ => return None,
        };
        Some(Answer { content_type, body })
    })
}

/// Scrapes every node at once each interval and records the round.
async fn scrape_forever(board: Arc<Mutex<Board>>) {
    let mut ticker = tokio::time::interval(SCRAPE_INTERVAL);
    ticker.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        ticker.tick().await;
        let targets = board.lock().expect("board lock").targets();
        let scrapes = targets.into_iter().map(|addr| async move {
            let addr = addr?;
            Some(
                scrape::fetch(addr)
                    .await
                    .and_then(|text| scrape::read(&text)),
            )
        });
        let results = futures_util::future::join_all(scrapes).await;
        board.lock().expect("board lock").record(now_ms(), results);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const METRICS: &str = "# TYPE causeway_txn_commits_total counter\ncauseway_txn_commits_total{kind=\"causal\"} 5\n";

    /// A cluster file of two DCs whose first node's metrics are served by a fake endpoint
    /// and whose second node's metrics port is closed.
    async fn cluster_with_one_live_node() -> ClusterConfig {
        let live = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let dead = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let mut c = crate::local_cluster("cure", 2, 1, "/tmp/x".into(), 7100, 7000).unwrap();
        c.nodes[0].metrics_addr = Some(live.local_addr().unwrap());
        c.nodes[1].metrics_addr = Some(dead.local_addr().unwrap());
        drop(dead);
        let elsewhere = metrics_http::elsewhere("metrics", None, None).into();
        tokio::spawn(metrics_http::serve(
            live,
            Arc::new(|| METRICS.to_string()),
            elsewhere,
        ));
        c
    }

    #[tokio::test]
    async fn serves_the_page_and_the_states_of_the_nodes_it_scrapes() {
        let config = cluster_with_one_live_node().await;
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap().to_string();
        let elsewhere = metrics_http::elsewhere("cluster page", None, None).into();
        tokio::spawn(serve(listener, config, elsewhere));
        let timeout = Duration::from_secs(5);
        let html = scrape::get(&addr, "/", timeout).await.unwrap();
        assert!(html.contains("<canvas id=\"c-tps\"") && html.contains("/app.js"));
        assert!(scrape::get(&addr, "/app.js", timeout)
            .await
            .unwrap()
            .contains("/api/cluster"));
        assert!(
            scrape::get(&addr, "/nothing", timeout).await.is_err(),
            "404"
        );
        tokio::time::sleep(SCRAPE_INTERVAL + Duration::from_millis(300)).await;
        let json = scrape::get(&addr, "/api/cluster?points=5", timeout)
            .await
            .unwrap();
        let view: api::ClusterView = serde_json::from_str(&json).unwrap();
        let states: Vec<&str> = view.nodes.iter().map(|n| n.state.as_str()).collect();
        assert_eq!(states, ["up", "down"], "{json}");
        assert_eq!(view.dcs.len(), 2);
        assert!(view.dcs[0].series.len() <= 5);
    }
}
