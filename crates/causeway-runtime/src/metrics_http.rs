//! The node's small HTTP/1.1 server: `GET /metrics` answers the Prometheus text format
//! (`text/plain; version=0.0.4`) through [`serve`]; [`serve_routes`] serves any read-only
//! set of paths (the cluster page of [`crate::dashboard`] uses it). Anything not routed,
//! and any method but GET, gets 404. One request per connection (`Connection: close`),
//! which is all a scraper or a browser polling once a second needs.
//!
//! A client of another protocol (a Redis client, Causeway's native client: input that does
//! not open with an HTTP method) is answered at once with one line, a RESP error both of
//! them show, saying where it belongs ([`elsewhere`]), and closed.
//!
//! It is ours rather than the exporter's `http-listener` (hyper) to keep the dependency
//! tree small and the limits explicit: at most [`SCRAPE_CONNECTIONS_MAX`] connections at
//! once (more are closed at once), a request head of at most [`REQUEST_BYTES_MAX`] bytes,
//! and [`IO_TIMEOUT`] to send it and to take the answer, so a stuck or hostile client
//! cannot hold resources.

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::Semaphore;

/// Most scrape connections served at once.
pub const SCRAPE_CONNECTIONS_MAX: usize = 16;
/// Largest request head (request line and headers) accepted.
pub const REQUEST_BYTES_MAX: usize = 8 * 1024;
/// How long a client may take to send its request, and to take the answer.
pub const IO_TIMEOUT: Duration = Duration::from_secs(5);
/// How long a client of another protocol, once answered, may take to close.
pub const FOREIGN_DRAIN: Duration = Duration::from_millis(500);
/// The content type of the Prometheus text exposition format.
pub const CONTENT_TYPE: &str = "text/plain; version=0.0.4; charset=utf-8";

/// Renders the metrics text at each scrape.
pub type Render = Arc<dyn Fn() -> String + Send + Sync>;

/// One answer to a GET.
#[derive(Clone, Debug, PartialEq)]
pub struct Answer {
    pub content_type: &'static str,
    pub body: String,
}

/// Answers `GET path?query` (`query` empty when none), or `None` for 404.
pub type Routes = Arc<dyn Fn(&str, &str) -> Option<Answer> + Send + Sync>;

/// The line a client of another protocol is told on a port serving `what` (e.g. "metrics
/// (HTTP: GET /metrics)"), naming the DC's RESP and native client endpoints where known: a
/// RESP error, which `redis-cli` shows as it is and Causeway's native client recognizes.
pub fn elsewhere(what: &str, resp: Option<SocketAddr>, client: Option<SocketAddr>) -> String {
    let mut line = format!("-ERR this is Causeway's {what} port");
    if let Some(addr) = resp {
        line.push_str(&format!(
            "; Redis clients connect to this DC's RESP port, {addr}"
        ));
    }
    if let Some(addr) = client {
        line.push_str(&format!(
            "; native clients (causeway cli) to its client port, {addr}"
        ));
    }
    line.push_str("\r\n");
    line
}

/// Serves `GET /metrics` on `listener` forever; a client of another protocol is told
/// `elsewhere` (a line of [`elsewhere`]) and closed.
pub async fn serve(listener: TcpListener, render: Render, elsewhere: Arc<str>) {
    let routes: Routes = Arc::new(move |path, _query| {
        (path == "/metrics").then(|| Answer {
            content_type: CONTENT_TYPE,
            body: render(),
        })
    });
    serve_routes(listener, routes, elsewhere).await
}

/// Serves GETs of `routes` on `listener` forever; a client of another protocol is told
/// `elsewhere` and closed.
pub async fn serve_routes(listener: TcpListener, routes: Routes, elsewhere: Arc<str>) {
    let permits = Arc::new(Semaphore::new(SCRAPE_CONNECTIONS_MAX));
    loop {
        let (stream, addr) = match listener.accept().await {
            Ok(v) => v,
            Err(e) => {
                tracing::warn!("accepting a metrics connection failed: {e}");
                tokio::time::sleep(Duration::from_millis(20)).await;
                continue;
            }
        };
        let Ok(permit) = permits.clone().try_acquire_owned() else {
            tracing::debug!(%addr, "too many metrics connections: closing one");
            continue;
        };
        let routes = routes.clone();
        let elsewhere = elsewhere.clone();
        tokio::spawn(async move {
            if let Err(e) = answer(stream, &routes, &elsewhere).await {
                tracing::debug!(%addr, "metrics connection ended: {e}");
            }
            drop(permit);
        });
    }
}

async fn answer(mut stream: TcpStream, routes: &Routes, elsewhere: &str) -> Result<(), String> {
    let head = tokio::time::timeout(IO_TIMEOUT, read_head(&mut stream))
        .await
        .map_err(|_| "no request in time".to_string())??;
    let answer = if foreign(&head) {
        let _ = stream.write_all(elsewhere.as_bytes()).await;
        let _ = stream.shutdown().await;
        // Read what else it sent before closing: closing with it unread resets the
        // connection, and the client may lose the answer.
        let mut rest = [0u8; 1024];
        let drain = async { while matches!(stream.read(&mut rest).await, Ok(n) if n > 0) {} };
        let _ = tokio::time::timeout(FOREIGN_DRAIN, drain).await;
        return Ok(());
    } else {
        let found = route(&head).and_then(|(path, query)| routes(&path, &query));
        match found {
            Some(a) => response("200 OK", a.content_type, &a.body),
            None => response("404 Not Found", "text/plain", "not found\n"),
        }
    };
    tokio::time::timeout(IO_TIMEOUT, stream.write_all(answer.as_bytes()))
        .await
        .map_err(|_| "the answer was not taken in time".to_string())?
        .map_err(|e| e.to_string())?;
    let _ = stream.shutdown().await;
    Ok(())
}

/// Whether a request opens as no HTTP request does (not with a method's capital letter):
/// a RESP array (`*`), a native client's frame length (a zero byte).
fn foreign(head: &[u8]) -> bool {
    !head.first().is_some_and(u8::is_ascii_uppercase)
}

/// Reads until the blank line that ends the head, or the first bytes of a client of
/// another protocol ([`foreign`]), which never sends one; refuses heads over the limit.
async fn read_head(stream: &mut TcpStream) -> Result<Vec<u8>, String> {
    let mut head = Vec::with_capacity(512);
    let mut buf = [0u8; 1024];
    let done = |head: &[u8]| {
        !head.is_empty() && (foreign(head) || head.windows(4).any(|w| w == b"\r\n\r\n"))
    };
    while !done(&head) {
        let n = stream.read(&mut buf).await.map_err(|e| e.to_string())?;
        if n == 0 {
            return Err("closed before the end of the request".into());
        }
        head.extend_from_slice(&buf[..n]);
        if head.len() > REQUEST_BYTES_MAX {
            return Err(format!("request head over {REQUEST_BYTES_MAX} bytes"));
        }
    }
    Ok(head)
}

/// The path and query string of a GET, `None` for any other method or a malformed line.
fn route(head: &[u8]) -> Option<(String, String)> {
    let line = head.split(|b| *b == b'\r').next()?;
    let line = std::str::from_utf8(line).ok()?;
    let mut parts = line.split(' ');
    let (method, target) = (parts.next()?, parts.next()?);
    let (path, query) = target.split_once('?').unwrap_or((target, ""));
    (method == "GET").then(|| (path.to_string(), query.to_string()))
}

fn response(status: &str, content_type: &str, body: &str) -> String {
    format!(
        "HTTP/1.1 {status}\r\nContent-Type: {content_type}\r\nContent-Length: {}\r\nCache-Control: no-store\r\nConnection: close\r\n\r\n{body}",
        body.len()
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_gets_are_routed_with_their_query() {
        let get = |path: &str, query: &str| Some((path.to_string(), query.to_string()));
        assert_eq!(
            route(b"GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n"),
            get("/metrics", "")
        );
        assert_eq!(
            route(b"GET /metrics?name=a HTTP/1.0\r\n\r\n"),
            get("/metrics", "name=a")
        );
        assert_eq!(route(b"POST /metrics HTTP/1.1\r\n\r\n"), None);
        assert_eq!(route(b"GET / HTTP/1.1\r\n\r\n"), get("/", ""));
        assert_eq!(route(b"\xff\r\n\r\n"), None);
    }

    async fn get(addr: std::net::SocketAddr, request: &[u8]) -> String {
        let mut s = TcpStream::connect(addr).await.unwrap();
        // The server may close before taking all of an oversized request.
        let _ = s.write_all(request).await;
        let mut out = String::new();
        let _ = s.read_to_string(&mut out).await;
        out
    }

    #[tokio::test]
    async fn serves_metrics_404s_the_rest_and_drops_oversized_requests() {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let elsewhere = elsewhere("metrics", Some(([127, 0, 0, 1], 7001).into()), None);
        tokio::spawn(serve(
            listener,
            Arc::new(|| "up 1\n".to_string()),
            elsewhere.into(),
        ));
        let ok = get(addr, b"GET /metrics HTTP/1.1\r\n\r\n").await;
        assert!(ok.starts_with("HTTP/1.1 200 OK\r\n"), "{ok}");
        assert!(ok.contains("Content-Type: text/plain; version=0.0.4"));
        assert!(ok.ends_with("\r\n\r\nup 1\n"), "{ok}");
        let missing = get(addr, b"GET /other HTTP/1.1\r\n\r\n").await;
        assert!(
            missing.starts_with("HTTP/1.1 404 Not Found\r\n"),
            "{missing}"
        );
        let resp = get(addr, b"*1\r\n$4\r\nPING\r\n").await;
        assert_eq!(
            resp,
            "-ERR this is Causeway's metrics port; Redis clients connect to this DC's RESP \
             port, 127.0.0.1:7001\r\n"
        );
        let native = get(addr, &[0, 0, 0, 9, 0, 2]).await;
        assert_eq!(native, resp, "a native client is told the same line");
        let mut huge = b"GET /metrics HTTP/1.1\r\n".to_vec();
        huge.extend(std::iter::repeat_n(b'a', REQUEST_BYTES_MAX + 10));
        assert_eq!(
            get(addr, &huge).await,
            "",
            "an oversized head gets no answer"
        );
    }
}
