//! The one number formatter of every output: text, Markdown, CSV and SVG.
//!
//! Each output names a [`Style`] for each kind of number it writes and the word it shows for
//! a value that is not finite (a coefficient of variation of a zero mean, a standard error
//! from two points): [`UNDEFINED`] in text and plots, [`MARKDOWN_UNDEFINED`] in tables,
//! [`CSV_UNDEFINED`] in CSV cells.

/// Text reports and plots: a value that is not finite.
pub const UNDEFINED: &str = "undefined";
/// Markdown tables: a value that is not finite.
pub const MARKDOWN_UNDEFINED: &str = "-";
/// CSV: a value that is not finite is an empty cell.
pub const CSV_UNDEFINED: &str = "";

/// How a finite number is written.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Style {
    /// `n` decimals, more below 1 so that four significant digits remain (at most 12):
    /// fitted parameters with their unit's precision (`2.0000` us, `0.0001235` us).
    Decimals(usize),
    /// Four significant digits, written plainly from 1e-3 to 1e6 and in scientific notation
    /// outside (`6.101`, `0.001235`, `1.235e6`): rates and times in summaries.
    Significant,
    /// Table columns: four significant digits as [`Style::Significant`], but whole numbers
    /// written out up to 1e12 so that a column of times reads without exponents (`512.0`,
    /// `10465300`, `0.001953`; `1.953e-4` below 1e-3).
    Column,
    /// Scientific with four decimals, as Luecke et al. (2009) print their statistics
    /// (`1.4630e-1`).
    Scientific,
    /// The shortest form that reads back to the same `f64` (CSV, for other programs).
    Exact,
    /// Exactly `n` decimals whatever the magnitude (a standard deviation beside its mean,
    /// as seed 001's tables print `242 ± 1`).
    Fixed(usize),
    /// Plot labels: at most about five characters of mantissa (`123.5`, `12.346`, `0.5000`,
    /// `1.235e5`).
    Label,
}

/// `x` written in `style`, or `undefined` when it is not finite.
pub fn number(x: f64, style: Style, undefined: &str) -> String {
    if !x.is_finite() {
        return undefined.to_string();
    }
    let a = x.abs();
    match style {
        Style::Decimals(n) => {
            let n = if a > 0.0 && a < 1.0 {
                n.max((3.0 - a.log10().floor()).min(12.0) as usize)
            } else {
                n
            };
            format!("{x:.n$}")
        }
        Style::Significant => {
            if a == 0.0 {
                "0".to_string()
            } else if (1e-3..1e6).contains(&a) {
                let n = (3 - a.log10().floor() as i32).max(0) as usize;
                format!("{x:.n$}")
            } else {
                format!("{x:.3e}")
            }
        }
        Style::Column => {
            if (1e4..1e12).contains(&a) {
                format!("{x:.0}")
            } else {
                number(x, Style::Significant, undefined)
            }
        }
        Style::Scientific => format!("{x:.4e}"),
        Style::Exact => format!("{x}"),
        Style::Fixed(n) => format!("{x:.n$}"),
        Style::Label => {
            if a >= 1e5 || (a > 0.0 && a < 1e-3) {
                format!("{x:.3e}")
            } else if a >= 100.0 {
                format!("{x:.1}")
            } else if a >= 1.0 {
                format!("{x:.3}")
            } else {
                format!("{x:.4}")
            }
        }
    }
}

/// [`number`] for text reports and plots: [`UNDEFINED`] when not finite.
pub fn text(x: f64, style: Style) -> String {
    number(x, style, UNDEFINED)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn styles() {
        assert_eq!(text(2.0, Style::Decimals(4)), "2.0000");
        assert_eq!(text(0.000_123_46, Style::Decimals(4)), "0.0001235");
        assert_eq!(text(1234.5, Style::Decimals(1)), "1234.5");
        assert_eq!(text(6.1009, Style::Significant), "6.101");
        assert_eq!(text(0.01402, Style::Significant), "0.01402");
        assert_eq!(text(1234567.0, Style::Significant), "1.235e6");
        assert_eq!(text(0.0, Style::Significant), "0");
        assert_eq!(text(0.1463, Style::Scientific), "1.4630e-1");
        assert_eq!(text(512.001, Style::Column), "512.0");
        assert_eq!(text(10465300.44, Style::Column), "10465300");
        assert_eq!(text(-12345.6, Style::Column), "-12346");
        assert_eq!(text(0.001953, Style::Column), "0.001953");
        assert_eq!(text(0.0001953, Style::Column), "1.953e-4");
        assert_eq!(text(2.5e12, Style::Column), "2.500e12");
        assert_eq!(text(0.0, Style::Column), "0");
        assert_eq!(number(0.1 + 0.2, Style::Exact, ""), "0.30000000000000004");
        assert_eq!(text(0.02738, Style::Fixed(1)), "0.0");
        assert_eq!(text(1234.56, Style::Fixed(1)), "1234.6");
        assert_eq!(text(123.456, Style::Label), "123.5");
        assert_eq!(text(12.3456, Style::Label), "12.346");
        assert_eq!(text(0.5, Style::Label), "0.5000");
        assert_eq!(text(2e5, Style::Label), "2.000e5");
    }

    #[test]
    fn undefined_values() {
        for style in [
            Style::Decimals(2),
            Style::Significant,
            Style::Column,
            Style::Scientific,
            Style::Exact,
            Style::Label,
        ] {
            assert_eq!(text(f64::NAN, style), UNDEFINED);
            assert_eq!(number(f64::INFINITY, style, MARKDOWN_UNDEFINED), "-");
            assert_eq!(number(f64::NEG_INFINITY, style, CSV_UNDEFINED), "");
        }
    }
}
