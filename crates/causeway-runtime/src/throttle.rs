//! Rate-limited log lines. A line that anyone who can reach a port can provoke at will (a
//! client refused for its password, a peer connection refused at its handshake, an accept
//! that fails for want of file descriptors) must not be written once per event, or a
//! stream of connections fills the data disk with the node's log (issue 75). A
//! [`Throttle`] lets one line through per interval and counts those it holds back; the
//! next line it lets through carries that count (`suppressed=N`).

use std::sync::Mutex;
use std::time::{Duration, Instant};

/// The interval of the node's throttled lines, in milliseconds: at most one line per
/// call site per interval.
pub const LOG_INTERVAL_MS: u64 = 10_000;

/// One call site's rate limit.
pub struct Throttle {
    interval_ms: u64,
    state: Mutex<State>,
}

struct State {
    /// When the last line went out.
    last: Option<Instant>,
    /// Lines held back since.
    suppressed: u64,
}

impl Throttle {
    /// A throttle letting one line through per `interval_ms`.
    pub const fn new(interval_ms: u64) -> Throttle {
        Throttle {
            interval_ms,
            state: Mutex::new(State {
                last: None,
                suppressed: 0,
            }),
        }
    }

    /// Whether a line may go out at `now`: `Some(how many were held back since the last
    /// one)`, or `None` when it is held back (and counted).
    pub fn admit(&self, now: Instant) -> Option<u64> {
        let mut s = self.state.lock().expect("throttle lock");
        let interval = Duration::from_millis(self.interval_ms);
        let due = s
            .last
            .is_none_or(|last| now.saturating_duration_since(last) >= interval);
        if !due {
            s.suppressed += 1;
            return None;
        }
        s.last = Some(now);
        Some(std::mem::take(&mut s.suppressed))
    }
}

/// Logs at `$level` (a `tracing` macro name) through the throttle `$throttle`, with a
/// `suppressed` field counting the lines held back since the last one.
#[macro_export]
macro_rules! throttled {
    ($level:ident, $throttle:expr, $($arg:tt)+) => {
        if let Some(n) = $throttle.admit(std::time::Instant::now()) {
            tracing::$level!(suppressed = n, $($arg)+);
        }
    };
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn one_line_per_interval_and_the_next_counts_those_held_back() {
        let t = Throttle::new(1_000);
        let start = Instant::now();
        let at = |ms| start + Duration::from_millis(ms);
        assert_eq!(t.admit(at(0)), Some(0), "the first line goes out");
        for ms in [1, 10, 500, 999] {
            assert_eq!(t.admit(at(ms)), None, "held back at {ms} ms");
        }
        assert_eq!(t.admit(at(1_000)), Some(4), "and counted");
        assert_eq!(t.admit(at(1_500)), None);
        assert_eq!(t.admit(at(5_000)), Some(1));
        assert_eq!(
            t.admit(at(6_000)),
            Some(0),
            "a quiet interval: nothing held back"
        );
    }
}
