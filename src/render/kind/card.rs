//! The report card in text: a heading and one line per rule, a flagged rule marked `!`.

use crate::analysis::document::ReportCard;
use std::fmt::Write;

/// The card's block: `REPORT CARD (...)`, then `  ! 6 normality: ...` per rule.
pub fn render(out: &mut String, card: &ReportCard) {
    let _ = writeln!(out, "\nREPORT CARD ({}; ! = flagged)", card.source);
    for r in &card.rules {
        let mark = if r.flagged { '!' } else { ' ' };
        let _ = writeln!(out, "  {mark} {:>2} {}: {}", r.rule, r.topic, r.says);
    }
}
