//! The one way the program ends with an error: a one-line reason, an optional hint, and the
//! exit code (1 a failed run, 2 bad usage).

/// Exit code of a failed run.
pub const EXIT_RUN: u8 = 1;
/// Exit code of bad usage.
pub const EXIT_USAGE: u8 = 2;

/// An error that ends the program: a one-line reason, an optional hint, and the exit code.
#[derive(Debug)]
pub struct Fatal {
    pub code: u8,
    pub reason: String,
    pub hint: Option<String>,
}

impl Fatal {
    /// Bad usage (exit 2), with a hint saying what would do.
    pub fn usage(reason: impl Into<String>, hint: impl Into<String>) -> Self {
        Fatal {
            code: EXIT_USAGE,
            reason: reason.into(),
            hint: Some(hint.into()),
        }
    }

    /// A rank that ends with `code` and says nothing: another rank reports the run (a rank
    /// other than 0 after a stop that rank 0 asked for).
    pub fn silent(code: u8) -> Self {
        Fatal {
            code,
            reason: String::new(),
            hint: None,
        }
    }

    /// A failed run (exit 1).
    pub fn run(reason: impl Into<String>, hint: Option<String>) -> Self {
        Fatal {
            code: EXIT_RUN,
            reason: reason.into(),
            hint,
        }
    }
}
