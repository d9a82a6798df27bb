//! Seed 001's background computation Q (Krumme & Greenfield 1988, §3.1 and Appendix A).
//!
//! The paper keeps a chosen loop running whenever timed communication is in progress, because
//! the instructions a processor executes change how it contends with the I/O controller for
//! memory; it ran one integer and one floating-point version. [`Endpoint::compute`] runs `Q`:
//! on real backends these very loops, whose duration the measuring program calibrates first
//! (the paper's "time without I/O"); on the simulator virtual CPU time that message handlers
//! preempt.
//!
//! [`Endpoint::compute`]: crate::Endpoint::compute

use serde::{Deserialize, Serialize};

/// Which loop Q runs (seed 001 §3.1, Tables 1 and 2).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum QKind {
    /// Integer additions, multiplications and compares (`qint`, Table 1).
    #[default]
    Int,
    /// Floating-point additions and multiplications with integer loop control (`qfloat`,
    /// Table 2).
    Float,
}

impl QKind {
    /// Name in reports and the result document.
    pub fn name(self) -> &'static str {
        match self {
            QKind::Int => "int",
            QKind::Float => "float",
        }
    }
}

/// An amount of the background computation: `iters` iterations of the inner loop of `q`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct Work {
    /// The loop.
    pub q: QKind,
    /// Iterations of its inner loop.
    pub iters: u64,
}

impl Work {
    /// `iters` iterations of the integer loop.
    pub const fn int(iters: u64) -> Work {
        Work {
            q: QKind::Int,
            iters,
        }
    }

    /// `iters` iterations of the floating-point loop.
    pub const fn float(iters: u64) -> Work {
        Work {
            q: QKind::Float,
            iters,
        }
    }
}

/// Inner iterations per pass of `qint` before its variables restart (`QINTLOOP`, App. A).
pub const QINT_LOOP: u64 = 40;
/// Inner iterations per pass of `qfloat` before its variables restart (`QFLOATLOOP`, App. A).
pub const QFLOAT_LOOP: u64 = 18;

/// Run `work` on this CPU.
#[inline]
pub fn run(work: Work) {
    match work.q {
        QKind::Int => q_int(work.iters),
        QKind::Float => q_float(work.iters),
    }
}

/// `qint` of Appendix A: a Fibonacci recurrence whose squares are summed, restarted every
/// [`QINT_LOOP`] iterations; `iters` inner iterations in all (wrapping, as the 16-bit
/// original's `int` did).
#[inline(never)]
pub fn q_int(iters: u64) {
    let mut left = iters;
    let mut iss: u64 = 0;
    while left > 0 {
        let pass = left.min(QINT_LOOP);
        let (mut i, mut j): (u64, u64) = (2, 3);
        iss = 0;
        for _ in 0..pass {
            let k = std::hint::black_box(i.wrapping_add(j));
            i = j;
            j = k;
            iss = iss.wrapping_add(k.wrapping_mul(k));
        }
        left -= pass;
    }
    std::hint::black_box(iss);
}

/// `qfloat` of Appendix A: additions and multiplications of doubles, restarted every
/// [`QFLOAT_LOOP`] iterations so that the values stay finite; `iters` inner iterations in all.
#[inline(never)]
pub fn q_float(iters: u64) {
    let mut left = iters;
    let mut fss = 0.0f64;
    while left > 0 {
        let pass = left.min(QFLOAT_LOOP);
        let (mut i, mut j) = (2.0f64, 3.0f64);
        fss = 0.0;
        for _ in 0..pass {
            j = std::hint::black_box(j + i);
            fss += j * j;
            i += j;
            fss += i * i;
        }
        left -= pass;
    }
    std::hint::black_box(fss);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn loops_run_any_count_and_stay_finite() {
        for n in [0, 1, 17, 18, 19, 40, 41, 1000] {
            q_int(n);
            q_float(n);
        }
        run(Work::int(5));
        run(Work::float(5));
        // 18 passes of qfloat's recurrence stay far below f64's range.
        let (mut i, mut j, mut fss) = (2.0f64, 3.0f64, 0.0f64);
        for _ in 0..QFLOAT_LOOP {
            j += i;
            fss += j * j;
            i += j;
            fss += i * i;
        }
        assert!(fss.is_finite() && fss > 0.0);
        assert_eq!(QKind::Float.name(), "float");
    }
}
