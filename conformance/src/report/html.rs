//! `report.html`: a cross-target matrix as one self-contained page. Inline style and script only
//! (no external CSS, script, font or image; a Content-Security-Policy that forbids loading any),
//! a legend, the targets with what was run, what each declared and what discovery saw, rows
//! every target skipped folded into one line (`--show-skipped` shows them), filters by suite,
//! tier, outcome and text (also preset from the query: `?outcome=fail`,
//! `?suite=acp&level=must&text=WS-`), and every failing, blocked or untested cell a link to
//! its section in the same page: Expected/Actual or the reason, and the wire log. Everything a
//! target or a profile wrote is escaped; the page's only script is the fixed one below.

use std::fmt::Write as _;

use crate::matrix::table::{Cell, Column, Matrix, Row, Verdict};
use crate::runner::WireRecord;

/// The most wire-log text one cell shows (its last entries, where a failure usually shows).
pub const CELL_WIRE_BYTES: usize = 32 * 1024;

/// The most stderr text one cell shows behind its link (its last lines).
pub const CELL_STDERR_BYTES: usize = 4 * 1024;

/// The most text of one Expected, Actual or Reason a cell shows (its start).
pub const DETAIL_BYTES: usize = 8 * 1024;

/// The most wire-log text the whole page shows; cells past it name their target's
/// `results.json` instead, so a matrix of many failing targets stays a page a browser opens.
pub const PAGE_WIRE_BYTES: usize = 8 * 1024 * 1024;

const STYLE: &str = "\
body{font:14px/1.4 system-ui,sans-serif;margin:1.5em;color:#222}
table{border-collapse:collapse;margin:1em 0}
th,td{border:1px solid #ccc;padding:2px 6px;text-align:left;vertical-align:top}
thead th{position:sticky;top:0;background:#f4f4f4}
td.v{text-align:center;white-space:nowrap}
#matrix td:nth-child(2){white-space:nowrap}
.v-pass{background:#dff5df}.v-fail{background:#f8d0d0;font-weight:bold}
.v-error{background:#f8e0b0}.v-blocked{background:#e4d8f4}.v-not-tested{background:#fff2b0}
.v-skip{color:#777}.v-not-run{color:#aaa}
.excused{font-weight:normal;background:#f4e4e4}
#filters label{margin-right:1em}
section.cell{border-top:2px solid #ccc;margin-top:1.5em}
pre{background:#f7f7f7;padding:6px;overflow-x:auto;white-space:pre-wrap;word-break:break-all}
dt{font-weight:bold}";

const SCRIPT: &str = "\
(function(){
var suite=document.getElementById('f-suite'),level=document.getElementById('f-level'),
outcome=document.getElementById('f-outcome'),text=document.getElementById('f-text'),
shown=document.getElementById('shown'),rows=document.querySelectorAll('#matrix tbody tr'),
given=new URLSearchParams(location.search);
[['suite',suite],['level',level],['outcome',outcome],['text',text]].forEach(function(f){
var v=given.get(f[0]);if(v!==null)f[1].value=v;});
function apply(){
var q=text.value.toLowerCase(),n=0;
rows.forEach(function(r){
var o=outcome.value,ok=(!suite.value||r.dataset.suite===suite.value)&&
(!level.value||r.dataset.level===level.value)&&
(!o||(o==='differs'?r.dataset.differs==='1':(' '+r.dataset.outcomes+' ').indexOf(' '+o+' ')>=0))&&
(!q||r.textContent.toLowerCase().indexOf(q)>=0);
r.hidden=!ok;if(ok)n++;});
shown.textContent=n+' of '+rows.length+' rows shown';}
[suite,level,outcome,text].forEach(function(e){e.addEventListener('input',apply);});
apply();})();";

/// The page of a matrix.
pub fn render(matrix: &Matrix) -> String {
    let mut html = String::new();
    html.push_str("<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n");
    html.push_str(
        "<meta http-equiv=\"Content-Security-Policy\" content=\"default-src 'none'; style-src 'unsafe-inline'; script-src 'unsafe-inline'\">\n",
    );
    html.push_str("<title>Conformance matrix</title>\n<style>\n");
    html.push_str(STYLE);
    html.push_str("\n</style>\n</head>\n<body>\n<h1>Conformance matrix</h1>\n");
    let folded = matrix.folded();
    let _ = writeln!(
        html,
        "<p>Selection: {}. {} row(s) × {} target(s); {} row(s) where the targets disagree{}.</p>",
        escape(&matrix.selection),
        matrix.rows.len(),
        matrix.columns.len(),
        matrix.rows.iter().filter(|r| r.differs()).count(),
        if folded.is_empty() {
            String::new()
        } else {
            format!(
                "; {} row(s) every target skipped are <a href=\"#folded\">folded away</a>",
                folded.len()
            )
        }
    );
    targets_table(&mut html, matrix);
    legend(&mut html);
    filters(&mut html, matrix);
    matrix_table(&mut html, matrix);
    if !folded.is_empty() {
        let ids: Vec<String> = folded.iter().map(|r| escape(&r.id)).collect();
        let _ = writeln!(
            html,
            "<p id=\"folded\">Skipped by every target ({}; <code>ski-conformance matrix --show-skipped</code> shows them as rows): {}.</p>",
            folded.len(),
            ids.join(", ")
        );
    }
    details(&mut html, matrix);
    untested(&mut html, matrix);
    stderr_sections(&mut html, matrix);
    html.push_str("<script>\n");
    html.push_str(SCRIPT);
    html.push_str("\n</script>\n</body>\n</html>\n");
    html
}

fn targets_table(html: &mut String, matrix: &Matrix) {
    html.push_str(
        "<h2>Targets</h2>\n<table id=\"targets\">\n<thead><tr><th>Target</th><th>Command or URL</th><th>Agent (declared)</th><th>Auth</th><th>ski</th><th>passed</th><th>failed</th><th>errors</th><th>blocked</th><th>skipped</th><th>not tested</th><th>not run</th><th>Run</th><th>Results</th></tr></thead>\n<tbody>\n",
    );
    for (n, column) in matrix.columns.iter().enumerate() {
        let what = match (&column.command, &column.url) {
            (Some(command), _) => format!("<code>{}</code>", escape(command)),
            (None, Some(url)) => format!("<code>{}</code>", escape(url)),
            (None, None) => format!("profile {}", escape(&column.target)),
        };
        let _ = write!(
            html,
            "<tr id=\"t-{n}\"><td>{}</td><td>{what}<br><small>{} · {}</small></td><td>{}</td><td>{}</td><td>{}</td>",
            escape(&column.label),
            escape(&column.target),
            escape(&column.description),
            escape(
                &column
                    .agent_text()
                    .unwrap_or_else(|| "not declared".to_owned())
            ),
            escape(column.auth.as_deref().unwrap_or("none")),
            escape(if column.ski_version.is_empty() {
                "unknown"
            } else {
                &column.ski_version
            }),
        );
        for count in [
            column.count(Verdict::Pass),
            column.count(Verdict::Fail),
            column.count(Verdict::Error),
            column.count(Verdict::Blocked),
            column.skipped(),
            column.count(Verdict::NotTested),
            column.count(Verdict::NotRun),
        ] {
            let _ = write!(html, "<td class=\"count\">{count}</td>");
        }
        let _ = writeln!(
            html,
            "<td>{}</td><td><code>{}</code></td></tr>",
            run_text(column),
            escape(&column.results)
        );
    }
    html.push_str("</tbody>\n</table>\n");
    for (n, column) in matrix.columns.iter().enumerate() {
        if column.discovered.is_empty() && column.discovery_notes.is_empty() {
            continue;
        }
        let _ = writeln!(
            html,
            "<h3 id=\"d-{n}\">Discovery of {}</h3>\n<p>Found: {}.</p>",
            escape(&column.label),
            if column.discovered.is_empty() {
                "nothing".to_owned()
            } else {
                escape(&column.discovered.join(", "))
            }
        );
        if !column.discovery_notes.is_empty() {
            html.push_str("<ul>\n");
            for note in &column.discovery_notes {
                let _ = writeln!(html, "<li>{}</li>", escape(&capped(note, DETAIL_BYTES)));
            }
            html.push_str("</ul>\n");
        }
    }
}

/// What each verdict and qualifier of a cell means.
fn legend(html: &mut String) {
    html.push_str("<h2>Legend</h2>\n<dl id=\"legend\">\n");
    for verdict in Verdict::ALL {
        let _ = writeln!(
            html,
            "<dt class=\"v v-{}\">{}</dt><dd>{}</dd>",
            verdict.as_str(),
            verdict.label(),
            verdict.meaning()
        );
    }
    for (note, meaning) in crate::matrix::table::QUALIFIERS {
        let _ = writeln!(html, "<dt>({note})</dt><dd>{meaning}</dd>");
    }
    html.push_str("</dl>\n");
}

/// `text` up to [`DETAIL_BYTES`]-like `max` bytes, saying how much it left out.
fn capped(text: &str, max: usize) -> String {
    if text.len() <= max {
        return text.to_owned();
    }
    let mut cut = max;
    while !text.is_char_boundary(cut) {
        cut -= 1;
    }
    format!(
        "{}… ({} more bytes in the target's results.json)",
        &text[..cut],
        text.len() - cut
    )
}

fn run_text(column: &Column) -> String {
    match (&column.problem, column.exit_code) {
        (Some(problem), _) => format!("no results: {}", escape(problem)),
        (None, code) => format!(
            "{} in {:.1} s, started {}; selection: {}",
            if code == Some(0) {
                "as expected"
            } else {
                "not as expected"
            },
            column.duration,
            escape(&column.started),
            escape(&column.selection)
        ),
    }
}

fn filters(html: &mut String, matrix: &Matrix) {
    html.push_str("<h2>Rows</h2>\n<form id=\"filters\">\n");
    html.push_str("<label>Suite <select id=\"f-suite\"><option value=\"\">all</option>");
    for suite in matrix.suites() {
        let _ = write!(html, "<option value=\"{0}\">{0}</option>", escape(suite));
    }
    html.push_str(
        "</select></label>\n<label>Tier <select id=\"f-level\"><option value=\"\">all</option>",
    );
    for level in matrix.levels() {
        let _ = write!(html, "<option value=\"{0}\">{0}</option>", level.as_str());
    }
    html.push_str("</select></label>\n<label>Outcome <select id=\"f-outcome\"><option value=\"\">any</option><option value=\"differs\">targets disagree</option>");
    for verdict in matrix.verdicts() {
        let _ = write!(
            html,
            "<option value=\"{}\">a cell is {}</option>",
            verdict.as_str(),
            verdict.label()
        );
    }
    html.push_str("</select></label>\n<label>Text <input id=\"f-text\" type=\"search\" placeholder=\"ID or title\"></label>\n<span id=\"shown\"></span>\n</form>\n");
}

fn matrix_table(html: &mut String, matrix: &Matrix) {
    html.push_str("<table id=\"matrix\">\n<thead><tr><th>Suite</th><th>ID</th><th>Tier</th><th>Category</th><th>Title</th>");
    for (n, column) in matrix.columns.iter().enumerate() {
        let _ = write!(
            html,
            "<th><a href=\"#t-{n}\">{}</a><br><small>{}</small></th>",
            escape(&column.label),
            escape(&column.agent_text().unwrap_or_default())
        );
    }
    html.push_str("</tr></thead>\n<tbody>\n");
    for (r, row) in matrix.shown_rows() {
        let outcomes: Vec<&str> = row.verdicts().into_iter().map(Verdict::as_str).collect();
        let _ = write!(
            html,
            "<tr id=\"r-{r}\" data-id=\"{}\" data-suite=\"{}\" data-level=\"{}\" data-outcomes=\"{}\" data-differs=\"{}\"><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td>",
            escape(&row.id),
            escape(&row.suite),
            row.level.as_str(),
            outcomes.join(" "),
            u8::from(row.differs()),
            escape(&row.suite),
            escape(&row.id),
            row.level.as_str(),
            row.category.as_str(),
            escape(&row.title)
        );
        for (c, cell) in row.cells.iter().enumerate() {
            let link = if cell.verdict.has_details() {
                Some(format!("c-{r}-{c}"))
            } else {
                matrix.columns[c]
                    .untested_group(r)
                    .filter(|_| cell.verdict == Verdict::NotTested)
                    .map(|k| format!("n-{c}-{k}"))
            };
            cell_html(html, c, cell, link.as_deref());
        }
        html.push_str("</tr>\n");
    }
    html.push_str("</tbody>\n</table>\n");
}

fn cell_html(html: &mut String, c: usize, cell: &Cell, link: Option<&str>) {
    let class = format!(
        "v v-{}{}",
        cell.verdict.as_str(),
        if cell.excused { " excused" } else { "" }
    );
    let title = cell
        .summary()
        .map(|s| format!(" title=\"{}\"", escape(&s)))
        .unwrap_or_default();
    let text = escape(&cell.text());
    if let Some(link) = link {
        let _ = write!(
            html,
            "<td class=\"{class}\" data-target=\"{c}\" data-verdict=\"{}\"{title}><a href=\"#{link}\">{text}</a></td>",
            cell.verdict.as_str()
        );
    } else {
        let _ = write!(
            html,
            "<td class=\"{class}\" data-target=\"{c}\" data-verdict=\"{}\"{title}>{text}</td>",
            cell.verdict.as_str()
        );
    }
}

fn details(html: &mut String, matrix: &Matrix) {
    let any = matrix
        .rows
        .iter()
        .any(|r| r.cells.iter().any(|c| c.verdict.has_details()));
    if !any {
        return;
    }
    html.push_str("<h2>Failing and blocked cells</h2>\n");
    let mut budget = PAGE_WIRE_BYTES;
    for (r, row) in matrix.rows.iter().enumerate() {
        for (c, (cell, column)) in row.cells.iter().zip(&matrix.columns).enumerate() {
            if cell.verdict.has_details() {
                section(html, (r, row), (c, column), cell, &mut budget);
            }
        }
    }
}

fn section(
    html: &mut String,
    (r, row): (usize, &Row),
    (c, column): (usize, &Column),
    cell: &Cell,
    budget: &mut usize,
) {
    let _ = writeln!(
        html,
        "<section class=\"cell\" id=\"c-{r}-{c}\">\n<h3>{} × {}: {}</h3>\n<p>{} <a href=\"#r-{r}\">back to the row</a> · <a href=\"#t-{c}\">the target</a></p>",
        escape(&row.id),
        escape(&column.label),
        escape(&cell.text()),
        escape(&row.title)
    );
    html.push_str("<dl>\n");
    if let Some(failure) = &cell.failure {
        let _ = writeln!(
            html,
            "<dt>Check</dt><dd>{}</dd>\n<dt>Expected</dt><dd><pre>{}</pre></dd>\n<dt>Actual</dt><dd><pre>{}</pre></dd>",
            escape(&capped(&failure.check, DETAIL_BYTES)),
            escape(&capped(&failure.expected, DETAIL_BYTES)),
            escape(&capped(&failure.actual, DETAIL_BYTES))
        );
        if let Some(location) = &failure.location {
            let _ = writeln!(html, "<dt>Where</dt><dd>{}</dd>", escape(location));
        }
    }
    if let Some(reason) = &cell.reason {
        let _ = writeln!(
            html,
            "<dt>Reason</dt><dd><pre>{}</pre></dd>",
            escape(&capped(reason, DETAIL_BYTES))
        );
    }
    html.push_str("</dl>\n");
    if !cell.stderr.is_empty() {
        let _ = writeln!(
            html,
            "<p><a href=\"#s-{r}-{c}\">What the processes wrote on stderr</a> ({} line(s)).</p>",
            cell.stderr.len()
        );
    }
    if !cell.wire.is_empty() {
        let (shown, left_out) = wire_tail(&cell.wire);
        let size: usize = shown.iter().map(|w| w.text.len()).sum();
        if size > *budget {
            let _ = writeln!(
                html,
                "<p>The wire log ({} entries) is left out of this page, which keeps {} MiB of wire logs in all: see {}.</p>",
                cell.wire.len(),
                PAGE_WIRE_BYTES / (1024 * 1024),
                escape(&column.results)
            );
        } else {
            *budget -= size;
            html.push_str("<h4>Wire log</h4>\n<pre class=\"wire\">");
            if left_out > 0 {
                let _ = writeln!(
                    html,
                    "({left_out} earlier entries left out here: see {})",
                    escape(&column.results)
                );
            }
            for w in shown {
                let _ = writeln!(
                    html,
                    "+{:.6}s {} {} {}",
                    w.t,
                    escape(&w.channel),
                    escape(&w.direction),
                    escape(&w.text)
                );
            }
            html.push_str("</pre>\n");
        }
    }
    html.push_str("</section>\n");
}

/// One section per distinct reason a target left rows untested, naming the rows.
fn untested(html: &mut String, matrix: &Matrix) {
    if matrix.columns.iter().all(|c| c.untested.is_empty()) {
        return;
    }
    html.push_str("<h2>Untested rows</h2>\n");
    for (c, column) in matrix.columns.iter().enumerate() {
        for (k, (reason, rows)) in column.untested.iter().enumerate() {
            let ids: Vec<String> = rows
                .iter()
                .map(|r| format!("<a href=\"#r-{r}\">{}</a>", escape(&matrix.rows[*r].id)))
                .collect();
            let _ = writeln!(
                html,
                "<section class=\"cell\" id=\"n-{c}-{k}\">\n<h3>{} × {} row(s): not tested</h3>\n<p>{} <a href=\"#t-{c}\">the target</a></p>\n<pre>{}</pre>\n</section>",
                escape(&column.label),
                rows.len(),
                ids.join(", "),
                escape(&capped(reason, DETAIL_BYTES))
            );
        }
    }
}

/// What each failing or blocked cell's processes wrote on stderr, each behind the link of its
/// cell's section and at most [`CELL_STDERR_BYTES`] (its last lines).
fn stderr_sections(html: &mut String, matrix: &Matrix) {
    let mut any = false;
    for (r, row) in matrix.rows.iter().enumerate() {
        for (c, (cell, column)) in row.cells.iter().zip(&matrix.columns).enumerate() {
            if !cell.verdict.has_details() || cell.stderr.is_empty() {
                continue;
            }
            if !any {
                html.push_str("<h2>Stderr</h2>\n");
                any = true;
            }
            let (shown, left_out) = tail(&cell.stderr, CELL_STDERR_BYTES);
            let _ = writeln!(
                html,
                "<section class=\"stderr\" id=\"s-{r}-{c}\">\n<h3>{} × {}: stderr</h3>\n<p><a href=\"#c-{r}-{c}\">back to the cell</a></p>\n<pre class=\"wire\">",
                escape(&row.id),
                escape(&column.label)
            );
            if left_out > 0 {
                let _ = writeln!(
                    html,
                    "({left_out} earlier line(s) left out here: see {})",
                    escape(&column.results)
                );
            }
            for w in shown {
                let _ = writeln!(
                    html,
                    "+{:.6}s {} {}",
                    w.t,
                    escape(&w.channel),
                    escape(&capped(&w.text, CELL_STDERR_BYTES))
                );
            }
            html.push_str("</pre>\n</section>\n");
        }
    }
}

/// The last entries of a wire log within [`CELL_WIRE_BYTES`], and how many came before them.
fn wire_tail(wire: &[WireRecord]) -> (&[WireRecord], usize) {
    tail(wire, CELL_WIRE_BYTES)
}

/// The last entries of a log within `max` bytes, and how many came before them.
fn tail(wire: &[WireRecord], max: usize) -> (&[WireRecord], usize) {
    let mut start = wire.len();
    let mut used = 0;
    while start > 0 && used + wire[start - 1].text.len() <= max {
        start -= 1;
        used += wire[start].text.len();
    }
    if start == wire.len() && start > 0 {
        // One entry longer than the budget: show it anyway (results.json cut it already).
        start -= 1;
    }
    (&wire[start..], start)
}

/// `text` safe in an element's content and in a quoted attribute: markup characters as
/// entities, control characters (but tab and newline) as `\xNN`.
pub fn escape(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for ch in text.chars() {
        match ch {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&#39;"),
            '\t' | '\n' => out.push(ch),
            c if c.is_control() => {
                let _ = write!(out, "\\x{{{:02x}}}", u32::from(c));
            }
            c => out.push(c),
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::escape;

    #[test]
    fn markup_and_control_characters_are_escaped() {
        assert_eq!(
            escape("<script>alert(\"x\")</script>&'\u{0}\u{1b}\u{85}\n"),
            "&lt;script&gt;alert(&quot;x&quot;)&lt;/script&gt;&amp;&#39;\\x{00}\\x{1b}\\x{85}\n"
        );
    }
}
