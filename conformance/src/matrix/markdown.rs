//! `matrix.md`: the comparison as Markdown: one line per target with its counts, the rows ×
//! targets table, then one line per failing, blocked or untested cell saying why (the wire logs
//! are in `report.html` and each target's own reports).

use std::fmt::Write as _;

use super::table::{Matrix, Verdict};

/// The Markdown of a matrix.
pub fn render(matrix: &Matrix) -> String {
    let mut md = String::new();
    let _ = writeln!(md, "# Conformance matrix\n");
    let _ = writeln!(
        md,
        "Selection: {}. {} row(s) × {} target(s); {} row(s) where the targets disagree.\n",
        text(&matrix.selection),
        matrix.rows.len(),
        matrix.columns.len(),
        matrix.rows.iter().filter(|r| r.differs()).count()
    );
    let _ = write!(md, "| Target | Profile |");
    for verdict in Verdict::ALL {
        let _ = write!(md, " {} |", capitalised(verdict.label()));
    }
    let _ = writeln!(md, " Run | Results |");
    let _ = write!(md, "|---|---|");
    for _ in Verdict::ALL {
        md.push_str("---:|");
    }
    let _ = writeln!(md, "---|---|");
    for column in &matrix.columns {
        let _ = write!(md, "| {} | {} |", text(&column.label), text(&column.target));
        for verdict in Verdict::ALL {
            let _ = write!(md, " {} |", column.counts.get(&verdict).unwrap_or(&0));
        }
        let run = match (&column.problem, column.exit_code) {
            (Some(problem), _) => format!("no results: {}", text(problem)),
            (None, Some(0)) => format!("as expected ({:.1} s)", column.duration),
            (None, _) => format!("not as expected ({:.1} s)", column.duration),
        };
        let _ = writeln!(md, " {run} | `{}` |", code(&column.results));
    }
    md.push('\n');

    let _ = write!(md, "| Suite | ID | Level | Title |");
    for column in &matrix.columns {
        let _ = write!(md, " {} |", text(&column.label));
    }
    md.push('\n');
    let _ = write!(md, "|---|---|---|---|");
    for _ in &matrix.columns {
        md.push_str("---|");
    }
    md.push('\n');
    for row in &matrix.rows {
        let _ = write!(
            md,
            "| {} | {} | {} | {} |",
            text(&row.suite),
            text(&row.id),
            row.level.as_str(),
            text(&row.title)
        );
        for cell in &row.cells {
            let shown = text(&cell.text());
            if matches!(cell.verdict, Verdict::Fail | Verdict::Error) && !cell.excused {
                let _ = write!(md, " **{shown}** |");
            } else {
                let _ = write!(md, " {shown} |");
            }
        }
        md.push('\n');
    }
    md.push('\n');

    let explained: Vec<String> = matrix
        .rows
        .iter()
        .flat_map(|row| {
            row.cells
                .iter()
                .zip(&matrix.columns)
                .filter(|(cell, _)| cell.verdict.has_details())
                .map(move |(cell, column)| {
                    format!(
                        "- `{}` × {}: {}: {}",
                        code(&row.id),
                        text(&column.label),
                        cell.text(),
                        text(
                            &cell
                                .summary()
                                .unwrap_or_else(|| "no reason given".to_owned())
                        )
                    )
                })
        })
        .collect();
    if !explained.is_empty() {
        let _ = writeln!(md, "## Why\n");
        let _ = writeln!(
            md,
            "Each failing, erroring, blocked or untested cell; the wire logs are in `report.html` and in each target's `report.md`.\n"
        );
        for line in explained {
            let _ = writeln!(md, "{line}");
        }
    }
    md
}

fn capitalised(text: &str) -> String {
    let mut chars = text.chars();
    match chars.next() {
        Some(first) => first.to_uppercase().chain(chars).collect(),
        None => String::new(),
    }
}

/// Text from a target or a profile in a table cell: on one line, no table breaks, no HTML.
fn text(value: &str) -> String {
    value
        .replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
        .replace('|', "\\|")
        .replace('`', "'")
        .replace(['\n', '\r'], " ")
}

/// Text inside a code span: no backticks, no line breaks.
fn code(value: &str) -> String {
    value
        .replace('`', "'")
        .replace('|', "\\|")
        .replace(['\n', '\r'], " ")
}
