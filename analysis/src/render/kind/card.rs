//! The report card in text: in the summary and the full report a heading and one line per
//! rule, a flagged rule marked `!`; under the table, one line naming the flagged rules.

use crate::analysis::document::ReportCard;
use crate::render::words::Detail;
use std::fmt::Write;

/// The card at `detail`: `REPORT CARD (...)`, then `  !  6 normality: ...` per rule; or, for
/// the table, `report card (...): rules flagged: 6 normality, 7 launches (--full shows it)`.
pub fn render(out: &mut String, card: &ReportCard, detail: Detail) {
    if detail == Detail::Table {
        let flagged: Vec<String> = card
            .rules
            .iter()
            .filter(|r| r.flagged)
            .map(|r| format!("{} {}", r.rule, r.topic))
            .collect();
        let which = if flagged.is_empty() {
            "no rule flagged".to_string()
        } else {
            format!("flagged: {}", flagged.join(", "))
        };
        let _ = writeln!(
            out,
            "report card ({}): {which} (--full shows it)",
            card.source
        );
        return;
    }
    let _ = writeln!(out, "\nREPORT CARD ({}; ! = flagged)", card.source);
    for r in &card.rules {
        let mark = if r.flagged { '!' } else { ' ' };
        let _ = writeln!(out, "  {mark} {:>2} {}: {}", r.rule, r.topic, r.says);
    }
}
