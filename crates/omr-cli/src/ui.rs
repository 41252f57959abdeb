//! Progress bars (on stderr, hidden when it is not a terminal or with --quiet) and small
//! formatting helpers.

use std::sync::{Arc, OnceLock};
use std::time::{Duration, Instant};

use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};
use omr_client::Progress;

#[derive(Debug, Clone, Copy)]
pub struct Ui {
    pub quiet: bool,
}

impl Ui {
    fn target(&self) -> ProgressDrawTarget {
        if self.quiet {
            ProgressDrawTarget::hidden()
        } else {
            ProgressDrawTarget::stderr()
        }
    }

    /// A spinner for work without a measurable amount.
    pub fn spinner(&self, msg: impl Into<String>) -> ProgressBar {
        let pb = ProgressBar::with_draw_target(None, self.target());
        pb.set_style(
            ProgressStyle::with_template("{spinner:.cyan} {msg} {elapsed:.dim}").expect("template"),
        );
        pb.set_message(msg.into());
        pb.enable_steady_tick(Duration::from_millis(100));
        pb
    }

    /// A spinner that shows only once `after` has passed: for work that is usually quick.
    pub fn spinner_after(&self, msg: impl Into<String>, after: Duration) -> LateSpinner {
        LateSpinner {
            ui: *self,
            msg: msg.into(),
            shown_after: Instant::now() + after,
            pb: OnceLock::new(),
        }
    }

    /// A bar counting bytes, with rate and time left.
    pub fn bytes(&self, msg: impl Into<String>, total: u64) -> ProgressBar {
        let pb = ProgressBar::with_draw_target(Some(total), self.target());
        pb.set_style(
            ProgressStyle::with_template(
                "{msg} [{bar:30.cyan/blue}] {bytes}/{total_bytes} {bytes_per_sec} eta {eta}",
            )
            .expect("template")
            .progress_chars("=> "),
        );
        pb.set_message(msg.into());
        pb
    }

    /// A bar counting items.
    pub fn items(&self, msg: impl Into<String>, total: u64, unit: &str) -> ProgressBar {
        let pb = ProgressBar::with_draw_target(Some(total), self.target());
        pb.set_style(
            ProgressStyle::with_template(&format!(
                "{{msg}} [{{bar:30.cyan/blue}}] {{pos}}/{{len}} {unit} {{elapsed}} eta {{eta}}"
            ))
            .expect("template")
            .progress_chars("=> "),
        );
        pb.set_message(msg.into());
        pb
    }
}

/// A spinner that appears late (see [`Ui::spinner_after`]).
#[derive(Debug)]
pub struct LateSpinner {
    ui: Ui,
    msg: String,
    shown_after: Instant,
    pb: OnceLock<ProgressBar>,
}

impl LateSpinner {
    /// Show `detail` beside the message, once the spinner is due.
    pub fn update(&self, detail: impl FnOnce() -> String) {
        if Instant::now() >= self.shown_after {
            let pb = self.pb.get_or_init(|| self.ui.spinner(self.msg.clone()));
            pb.set_message(format!("{} {}", self.msg, detail()));
        }
    }

    pub fn finish_and_clear(&self) {
        if let Some(pb) = self.pb.get() {
            pb.finish_and_clear();
        }
    }
}

/// An SDK progress callback driving `pb` (the total may be learned late, e.g. from a header).
pub fn progress(pb: &ProgressBar) -> Progress {
    let pb = pb.clone();
    Arc::new(move |done, total| {
        if pb.length() != Some(total) {
            pb.set_length(total);
        }
        pb.set_position(done);
    })
}

/// "106.9 MB", "2.8 KB", "612 B".
pub fn size(bytes: u64) -> String {
    match bytes {
        b if b >= 1_000_000 => format!("{:.1} MB", b as f64 / 1e6),
        b if b >= 1_000 => format!("{:.1} KB", b as f64 / 1e3),
        b => format!("{b} B"),
    }
}

/// A payload for a terminal: its text if it is printable UTF-8, else hex (both shortened).
pub fn preview(payload: &[u8]) -> String {
    const MAX: usize = 60;
    match std::str::from_utf8(payload) {
        Ok(s) if s.chars().all(|c| !c.is_control() || c == '\n' || c == '\t') => {
            let one_line = s.replace(['\n', '\t'], " ");
            if one_line.chars().count() > MAX {
                format!("{:?}…", one_line.chars().take(MAX).collect::<String>())
            } else {
                format!("{one_line:?}")
            }
        }
        _ => {
            let hex: String = payload
                .iter()
                .take(MAX / 2)
                .map(|b| format!("{b:02x}"))
                .collect();
            format!("0x{hex}{}", if payload.len() > MAX / 2 { "…" } else { "" })
        }
    }
}

pub fn secs(d: Duration) -> String {
    format!("{:.1} s", d.as_secs_f64())
}

/// "2.31 s", or "14.2 ms" below a second.
pub fn secs_ms(d: Duration) -> String {
    match d.as_secs_f64() {
        s if s >= 1.0 => format!("{s:.2} s"),
        s => format!("{:.1} ms", s * 1e3),
    }
}
