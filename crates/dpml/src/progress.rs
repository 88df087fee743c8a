//! Progress of long work on stderr. On a terminal, a bar that fits 80 columns; anywhere else
//! (`nohup`, a batch scheduler, `2> log`) plain lines, because a redrawn bar turns a log into
//! carriage returns and escape codes. Plain lines come once per finished unit of work (a sweep
//! run, a reference model) or when the command says so ([`Progress::line`], e.g. once per
//! epoch), each with the elapsed time.
//!
//! Writes never panic and never fail the command: progress is not the result.

use std::io::{IsTerminal as _, Write as _};
use std::sync::Mutex;
use std::time::{Duration, Instant};

use crate::summary::{grouped, short};

/// Progress of one piece of work, counted in `unit`s (`"run"`, `"model"`, `"step"`).
pub struct Progress {
    /// The command or stage, the first word of every plain line (`"train"`, `"sweep"`).
    what: String,
    /// What is counted, singular.
    unit: &'static str,
    /// Whether plain mode prints a line for every [`Progress::inc`].
    line_per_unit: bool,
    start: Instant,
    /// When the counted work began, if after `start` (training starts after calibration):
    /// rates are measured from here.
    work_start: Mutex<Option<Instant>>,
    draw: Draw,
}

enum Draw {
    /// A terminal: indicatif redraws the bar in place.
    Bar(indicatif::ProgressBar),
    /// Not a terminal: the counts plain lines are made of.
    Lines(Mutex<Counts>),
}

#[derive(Default)]
struct Counts {
    pos: u64,
    len: u64,
    message: String,
}

impl Progress {
    /// Progress over `len` units (0 when not known yet: [`Progress::set_length`]). With
    /// `line_per_unit`, plain mode prints a line for every finished unit; otherwise only
    /// [`Progress::line`] prints (work with thousands of small units, such as steps).
    pub fn new(len: u64, what: &str, unit: &'static str, line_per_unit: bool) -> Self {
        let draw = if std::io::stderr().is_terminal() {
            Draw::Bar(bar(len, what, unit))
        } else {
            Draw::Lines(Mutex::new(Counts {
                len,
                ..Counts::default()
            }))
        };
        Progress {
            what: what.to_string(),
            unit,
            line_per_unit,
            start: Instant::now(),
            work_start: Mutex::new(None),
            draw,
        }
    }

    /// Progress of work whose total is not known (rows a query reads): on a terminal a
    /// spinner with the count, its rate and the message; otherwise only [`Progress::line`]
    /// prints.
    pub fn counter(what: &str, unit: &'static str) -> Self {
        Self::spinning(what, unit, true)
    }

    /// Progress of work that shows no count (what it would count is private): on a terminal a
    /// spinner with the message; otherwise only [`Progress::line`] prints.
    pub fn activity(what: &str) -> Self {
        Self::spinning(what, "", false)
    }

    fn spinning(what: &str, unit: &'static str, counted: bool) -> Self {
        let draw = if std::io::stderr().is_terminal() {
            Draw::Bar(spinner(what, unit, counted))
        } else {
            Draw::Lines(Mutex::new(Counts::default()))
        };
        Progress {
            what: what.to_string(),
            unit,
            line_per_unit: false,
            start: Instant::now(),
            work_start: Mutex::new(None),
            draw,
        }
    }

    /// Whether it draws a bar (stderr is a terminal) rather than plain lines.
    pub fn is_bar(&self) -> bool {
        matches!(self.draw, Draw::Bar(_))
    }

    /// The counted work starts now: later rates leave out the time spent before (setup,
    /// calibration). Elapsed times still count from the start.
    pub fn start_work(&self) {
        if let Ok(mut w) = self.work_start.lock() {
            *w = Some(Instant::now());
        }
        if let Draw::Bar(b) = &self.draw {
            b.reset_eta();
        }
    }

    /// Sets the number of units.
    pub fn set_length(&self, len: u64) {
        match &self.draw {
            Draw::Bar(b) => b.set_length(len),
            Draw::Lines(c) => {
                with(c, |c| c.len = len);
            }
        }
    }

    /// Sets the units done.
    pub fn set_position(&self, pos: u64) {
        match &self.draw {
            Draw::Bar(b) => b.set_position(pos),
            Draw::Lines(c) => {
                with(c, |c| c.pos = pos);
            }
        }
    }

    /// A short note beside the bar (the loss so far), or after the count of the next plain line.
    pub fn set_message(&self, message: impl Into<String>) {
        let message = crate::output::printable(&message.into()).into_owned();
        match &self.draw {
            Draw::Bar(b) => b.set_message(message),
            Draw::Lines(c) => {
                with(c, |c| c.message = message);
            }
        }
    }

    /// `n` more units done; in plain mode with `line_per_unit`, one line such as
    /// `sweep: run 3/12, 4.10 s elapsed, 0.732 runs/s`.
    pub fn inc(&self, n: u64) {
        match &self.draw {
            Draw::Bar(b) => b.inc(n),
            Draw::Lines(c) => {
                // The line is printed under the lock, so that workers finishing together
                // print their counts in order.
                with(c, |c| {
                    c.pos += n;
                    if !self.line_per_unit {
                        return;
                    }
                    let note = if c.message.is_empty() {
                        String::new()
                    } else {
                        format!(" ({})", c.message)
                    };
                    let of = if c.len > 0 {
                        format!("/{}", c.len)
                    } else {
                        String::new()
                    };
                    let head = format!("{} {}{of}{note}", self.unit, c.pos);
                    self.line(&head, Some((c.pos as f64, self.unit)), "");
                });
            }
        }
    }

    /// One line that stays: `{what}: {head}, {elapsed} elapsed[, {rate} {unit}s/s][, {tail}]`.
    /// On a terminal it is printed above the bar; otherwise it is the plain progress line.
    pub fn line(&self, head: &str, done: Option<(f64, &str)>, tail: &str) {
        let elapsed = self.start.elapsed();
        let mut text = format!("{}: {head}, {} elapsed", self.what, seconds(elapsed));
        if let Some((count, unit)) = done {
            let working = self
                .work_start
                .lock()
                .ok()
                .and_then(|w| *w)
                .map_or(elapsed, |w| w.elapsed());
            text.push_str(", ");
            text.push_str(&rate(count, unit, working));
        }
        if !tail.is_empty() {
            text.push_str(", ");
            text.push_str(tail);
        }
        match &self.draw {
            Draw::Bar(b) => b.suspend(|| write_line(&text)),
            Draw::Lines(_) => write_line(&text),
        }
    }

    /// Removes the bar (plain mode printed its lines already).
    pub fn finish_and_clear(&self) {
        if let Draw::Bar(b) = &self.draw {
            b.finish_and_clear();
        }
    }
}

/// A poisoned lock only means another thread panicked mid-update: progress goes on without it.
fn with<T>(counts: &Mutex<Counts>, f: impl FnOnce(&mut Counts) -> T) -> Option<T> {
    counts.lock().ok().map(|mut c| f(&mut c))
}

/// A progress line, control characters escaped (it may name an architecture from a file).
fn write_line(text: &str) {
    let text = crate::output::printable(text);
    let _ = writeln!(std::io::stderr().lock(), "{text}");
}

/// The terminal bar: at most 80 columns whatever the terminal's width: what (cut to 10) +
/// bar 16 + counts up to 13 + rate up to 14 + eta, and the message cut to 12.
fn bar(len: u64, what: &str, unit: &'static str) -> indicatif::ProgressBar {
    let bar = indicatif::ProgressBar::with_draw_target(
        Some(len),
        indicatif::ProgressDrawTarget::stderr(),
    );
    let style = indicatif::ProgressStyle::with_template(
        "{prefix:<10!} [{bar:16}] {pos}/{len} {rate} eta {eta} {msg:<12!}",
    )
    .map(|s| {
        s.progress_chars("=> ").with_key(
            "rate",
            move |state: &indicatif::ProgressState, w: &mut dyn std::fmt::Write| {
                let _ = write!(w, "{}", per_second(state.per_sec(), unit));
            },
        )
    })
    .unwrap_or_else(|_| indicatif::ProgressStyle::default_bar());
    bar.set_style(style);
    bar.set_prefix(what.to_string());
    bar
}

/// The terminal line of [`Progress::counter`]: what (cut to 10), a spinner, the count with
/// its unit and rate (when `counted`), and the message cut to 40 (80 columns in all).
fn spinner(what: &str, unit: &'static str, counted: bool) -> indicatif::ProgressBar {
    let bar =
        indicatif::ProgressBar::with_draw_target(None, indicatif::ProgressDrawTarget::stderr());
    let style = indicatif::ProgressStyle::with_template(if counted {
        "{prefix:<10!} {spinner} {human_pos} {unit}s {rate} {msg:<40!}"
    } else {
        "{prefix:<10!} {spinner} {elapsed} {msg:<40!}"
    })
    .map(|s| {
        s.with_key(
            "rate",
            move |state: &indicatif::ProgressState, w: &mut dyn std::fmt::Write| {
                let _ = write!(w, "{}", per_second(state.per_sec(), unit));
            },
        )
        .with_key(
            "unit",
            move |_: &indicatif::ProgressState, w: &mut dyn std::fmt::Write| {
                let _ = write!(w, "{unit}");
            },
        )
    })
    .unwrap_or_else(|_| indicatif::ProgressStyle::default_spinner());
    bar.set_style(style);
    bar.set_prefix(what.to_string());
    bar.enable_steady_tick(Duration::from_millis(200));
    bar
}

/// `4,300 samples/s`: work done per second of `elapsed`, with its unit.
pub fn rate(count: f64, unit: &str, elapsed: Duration) -> String {
    let secs = elapsed.as_secs_f64();
    if secs <= 0.0 {
        return format!("- {unit}s/s");
    }
    per_second(count / secs, unit)
}

/// `4,300 samples/s`.
fn per_second(per_sec: f64, unit: &str) -> String {
    let number = if !per_sec.is_finite() {
        "-".to_string()
    } else if per_sec >= 1000.0 {
        grouped(per_sec.round() as u64)
    } else {
        short(per_sec)
    };
    format!("{number} {unit}s/s")
}

/// `1.20 s`, `3 min 5 s`: elapsed time for a person.
pub fn seconds(d: Duration) -> String {
    let s = d.as_secs_f64();
    if s < 10.0 {
        format!("{s:.2} s")
    } else if s < 60.0 {
        format!("{s:.1} s")
    } else {
        let whole = d.as_secs();
        format!("{} min {} s", whole / 60, whole % 60)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rates_carry_units_and_group_thousands() {
        assert_eq!(
            rate(8600.0, "sample", Duration::from_secs(2)),
            "4,300 samples/s"
        );
        assert_eq!(rate(3.0, "run", Duration::from_secs(4)), "0.750 runs/s");
    }

    #[test]
    fn elapsed_times_read_as_seconds_then_minutes() {
        assert_eq!(seconds(Duration::from_millis(1200)), "1.20 s");
        assert_eq!(seconds(Duration::from_secs(185)), "3 min 5 s");
    }
}
