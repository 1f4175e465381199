//! `matrix.md`: the comparison as Markdown: one line per target (what was run, what it declared,
//! its counts as its run gives them) and what discovery saw, a legend, the rows × targets table
//! (rows every target skipped folded into one line), then why each failing or blocked cell is so
//! and each reason of the untested ones once (the wire logs are in `report.html` and each
//! target's own reports).

use std::fmt::Write as _;

use super::table::{Matrix, Verdict};

/// The Markdown of a matrix.
pub fn render(matrix: &Matrix) -> String {
    let mut md = String::new();
    let _ = writeln!(md, "# Conformance matrix\n");
    let folded = matrix.folded();
    let _ = writeln!(
        md,
        "Selection: {}. {} row(s) × {} target(s); {} row(s) where the targets disagree{}.\n",
        text(&matrix.selection),
        matrix.rows.len(),
        matrix.columns.len(),
        matrix.rows.iter().filter(|r| r.differs()).count(),
        if folded.is_empty() {
            String::new()
        } else {
            format!(
                "; {} row(s) every target skipped are folded away (listed after the table)",
                folded.len()
            )
        }
    );
    targets(&mut md, matrix);
    legend(&mut md);

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
    for (_, row) in matrix.shown_rows() {
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
    if !folded.is_empty() {
        let ids: Vec<String> = folded
            .iter()
            .map(|r| format!("`{}`", code(&r.id)))
            .collect();
        let _ = writeln!(
            md,
            "Skipped by every target ({}; `ski-conformance matrix --show-skipped` shows them as rows): {}.\n",
            folded.len(),
            ids.join(", ")
        );
    }
    why(&mut md, matrix);
    md
}

/// One line per target: what was run, what it declared, how it authenticated, its counts as
/// its own run gives them; then what discovery saw of each.
fn targets(md: &mut String, matrix: &Matrix) {
    let _ = writeln!(
        md,
        "| Target | Command or URL | Agent (declared) | Auth | ski | Passed | Failed | Errors | Blocked | Skipped | Not tested | Not run | Run | Results |"
    );
    let _ = writeln!(
        md,
        "|---|---|---|---|---|---:|---:|---:|---:|---:|---:|---:|---|---|"
    );
    for column in &matrix.columns {
        let what = match (&column.command, &column.url) {
            (Some(command), _) => format!("`{}`", code(command)),
            (None, Some(url)) => format!("`{}`", code(url)),
            (None, None) => format!("profile {}", text(&column.target)),
        };
        let run = match (&column.problem, column.exit_code) {
            (Some(problem), _) => format!("no results: {}", text(problem)),
            (None, Some(0)) => format!("as expected ({:.1} s)", column.duration),
            (None, _) => format!("not as expected ({:.1} s)", column.duration),
        };
        let _ = writeln!(
            md,
            "| {} | {what} | {} | {} | {} | {} | {} | {} | {} | {} | {} | {} | {run} | `{}` |",
            text(&column.label),
            text(
                &column
                    .agent_text()
                    .unwrap_or_else(|| "not declared".to_owned())
            ),
            text(column.auth.as_deref().unwrap_or("none")),
            text(if column.ski_version.is_empty() {
                "unknown"
            } else {
                &column.ski_version
            }),
            column.count(Verdict::Pass),
            column.count(Verdict::Fail),
            column.count(Verdict::Error),
            column.count(Verdict::Blocked),
            column.skipped(),
            column.count(Verdict::NotTested),
            column.count(Verdict::NotRun),
            code(&column.results)
        );
    }
    md.push('\n');
    for column in &matrix.columns {
        if column.discovered.is_empty() && column.discovery_notes.is_empty() {
            continue;
        }
        let _ = writeln!(
            md,
            "Discovery of {}: found {}.\n",
            text(&column.label),
            if column.discovered.is_empty() {
                "nothing".to_owned()
            } else {
                text(&column.discovered.join(", "))
            }
        );
        for note in &column.discovery_notes {
            let _ = writeln!(md, "- {}", text(note));
        }
        if !column.discovery_notes.is_empty() {
            md.push('\n');
        }
    }
}

/// What each verdict and each qualifier of a cell means.
fn legend(md: &mut String) {
    let _ = writeln!(md, "Legend:\n");
    for verdict in Verdict::ALL {
        let _ = writeln!(md, "- **{}**: {}.", verdict.label(), verdict.meaning());
    }
    for (note, meaning) in super::table::QUALIFIERS {
        let _ = writeln!(md, "- *({note})*: {meaning}.");
    }
    md.push('\n');
}

/// Why each failing, erroring or blocked cell is so, and each reason of the untested ones once.
fn why(md: &mut String, matrix: &Matrix) {
    let mut explained: Vec<String> = matrix
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
    for column in &matrix.columns {
        for (reason, rows) in &column.untested {
            let ids: Vec<String> = rows
                .iter()
                .map(|r| format!("`{}`", code(&matrix.rows[*r].id)))
                .collect();
            explained.push(format!(
                "- {} not tested ({} row(s): {}): {}",
                text(&column.label),
                rows.len(),
                ids.join(", "),
                text(&super::table::first_line(reason))
            ));
        }
    }
    if !explained.is_empty() {
        let _ = writeln!(md, "## Why\n");
        let _ = writeln!(
            md,
            "Each failing, erroring or blocked cell, and each reason a target left rows untested; the wire logs are in `report.html` and in each target's `report.md`.\n"
        );
        for line in explained {
            let _ = writeln!(md, "{line}");
        }
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
