//! The node's small HTTP/1.1 server: `GET /metrics` answers the Prometheus text format
//! (`text/plain; version=0.0.4`) through [`serve`]; [`serve_routes`] serves any read-only
//! set of paths (the cluster page of [`crate::dashboard`] uses it). Anything not routed,
//! and any method but GET, gets 404. One request per connection (`Connection: close`),
//! which is all a scraper or a browser polling once a second needs.
//!
//! It is ours rather than the exporter's `http-listener` (hyper) to keep the dependency
//! tree small and the limits explicit: at most [`SCRAPE_CONNECTIONS_MAX`] connections at
//! once (more are closed at once), a request head of at most [`REQUEST_BYTES_MAX`] bytes,
//! and [`IO_TIMEOUT`] to send it and to take the answer, so a stuck or hostile client
//! cannot hold resources.

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

/// Serves `GET /metrics` on `listener` forever.
pub async fn serve(listener: TcpListener, render: Render) {
    let routes: Routes = Arc::new(move |path, _query| {
        (path == "/metrics").then(|| Answer {
            content_type: CONTENT_TYPE,
            body: render(),
        })
    });
    serve_routes(listener, routes).await
}

/// Serves GETs of `routes` on `listener` forever.
pub async fn serve_routes(listener: TcpListener, routes: Routes) {
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
        tokio::spawn(async move {
            if let Err(e) = answer(stream, &routes).await {
                tracing::debug!(%addr, "metrics connection ended: {e}");
            }
            drop(permit);
        });
    }
}

async fn answer(mut stream: TcpStream, routes: &Routes) -> Result<(), String> {
    let head = tokio::time::timeout(IO_TIMEOUT, read_head(&mut stream))
        .await
        .map_err(|_| "no request in time".to_string())??;
    let found = route(&head).and_then(|(path, query)| routes(&path, &query));
    let answer = match found {
        Some(a) => response("200 OK", a.content_type, &a.body),
        None => response("404 Not Found", "text/plain", "not found\n"),
    };
    tokio::time::timeout(IO_TIMEOUT, stream.write_all(answer.as_bytes()))
        .await
        .map_err(|_| "the answer was not taken in time".to_string())?
        .map_err(|e| e.to_string())?;
    let _ = stream.shutdown().await;
    Ok(())
}

/// Reads until the blank line that ends the head; refuses heads over the limit.
async fn read_head(stream: &mut TcpStream) -> Result<Vec<u8>, String> {
    let mut head = Vec::with_capacity(512);
    let mut buf = [0u8; 1024];
    while !head.windows(4).any(|w| w == b"\r\n\r\n") {
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
        tokio::spawn(serve(listener, Arc::new(|| "up 1\n".to_string())));
        let ok = get(addr, b"GET /metrics HTTP/1.1\r\n\r\n").await;
        assert!(ok.starts_with("HTTP/1.1 200 OK\r\n"), "{ok}");
        assert!(ok.contains("Content-Type: text/plain; version=0.0.4"));
        assert!(ok.ends_with("\r\n\r\nup 1\n"), "{ok}");
        let missing = get(addr, b"GET /other HTTP/1.1\r\n\r\n").await;
        assert!(
            missing.starts_with("HTTP/1.1 404 Not Found\r\n"),
            "{missing}"
        );
        let mut huge = b"GET /metrics HTTP/1.1\r\n".to_vec();
        huge.extend(std::iter::repeat_n(b'a', REQUEST_BYTES_MAX + 10));
        assert_eq!(
            get(addr, &huge).await,
            "",
            "an oversized head gets no answer"
        );
    }
}
