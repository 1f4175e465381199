//! `report.html`: a cross-target matrix as one self-contained page. Inline style and script only
//! (no external CSS, script, font or image; a Content-Security-Policy that forbids loading any),
//! filters by suite, tier, outcome and text (also preset from the query: `?outcome=fail`,
//! `?suite=acp&level=must&text=WS-`), and every failing, blocked or untested cell a link to
//! its section in the same page: Expected/Actual or the reason, and the wire log. Everything a
//! target or a profile wrote is escaped; the page's only script is the fixed one below.

use std::fmt::Write as _;

use crate::matrix::table::{Cell, Column, Matrix, Row, Verdict};
use crate::runner::WireRecord;

/// The most wire-log text one cell shows (its last entries, where a failure usually shows).
pub const CELL_WIRE_BYTES: usize = 32 * 1024;

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
    let _ = writeln!(
        html,
        "<p>Selection: {}. {} row(s) × {} target(s); {} row(s) where the targets disagree.</p>",
        escape(&matrix.selection),
        matrix.rows.len(),
        matrix.columns.len(),
        matrix.rows.iter().filter(|r| r.differs()).count()
    );
    targets_table(&mut html, matrix);
    filters(&mut html, matrix);
    matrix_table(&mut html, matrix);
    details(&mut html, matrix);
    html.push_str("<script>\n");
    html.push_str(SCRIPT);
    html.push_str("\n</script>\n</body>\n</html>\n");
    html
}

fn targets_table(html: &mut String, matrix: &Matrix) {
    html.push_str(
        "<h2>Targets</h2>\n<table id=\"targets\">\n<thead><tr><th>Target</th><th>Profile</th>",
    );
    for verdict in Verdict::ALL {
        let _ = write!(html, "<th>{}</th>", verdict.label());
    }
    html.push_str("<th>Run</th><th>Results</th></tr></thead>\n<tbody>\n");
    for (n, column) in matrix.columns.iter().enumerate() {
        let _ = write!(
            html,
            "<tr id=\"t-{n}\"><td>{}</td><td>{}<br><small>{}</small></td>",
            escape(&column.label),
            escape(&column.target),
            escape(&column.description)
        );
        for verdict in Verdict::ALL {
            let _ = write!(
                html,
                "<td>{}</td>",
                column.counts.get(&verdict).unwrap_or(&0)
            );
        }
        let _ = writeln!(
            html,
            "<td>{}</td><td><code>{}</code></td></tr>",
            run_text(column),
            escape(&column.results)
        );
    }
    html.push_str("</tbody>\n</table>\n");
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
            "<th><a href=\"#t-{n}\">{}</a></th>",
            escape(&column.label)
        );
    }
    html.push_str("</tr></thead>\n<tbody>\n");
    for (r, row) in matrix.rows.iter().enumerate() {
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
            cell_html(html, r, c, cell);
        }
        html.push_str("</tr>\n");
    }
    html.push_str("</tbody>\n</table>\n");
}

fn cell_html(html: &mut String, r: usize, c: usize, cell: &Cell) {
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
    if cell.verdict.has_details() {
        let _ = write!(
            html,
            "<td class=\"{class}\" data-target=\"{c}\" data-verdict=\"{}\"{title}><a href=\"#c-{r}-{c}\">{text}</a></td>",
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
    html.push_str("<h2>Failing, blocked and untested cells</h2>\n");
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
            escape(&failure.check),
            escape(&failure.expected),
            escape(&failure.actual)
        );
        if let Some(location) = &failure.location {
            let _ = writeln!(html, "<dt>Where</dt><dd>{}</dd>", escape(location));
        }
    }
    if let Some(reason) = &cell.reason {
        let _ = writeln!(
            html,
            "<dt>Reason</dt><dd><pre>{}</pre></dd>",
            escape(reason)
        );
    }
    html.push_str("</dl>\n");
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

/// The last entries of a wire log within [`CELL_WIRE_BYTES`], and how many came before them.
fn wire_tail(wire: &[WireRecord]) -> (&[WireRecord], usize) {
    let mut start = wire.len();
    let mut used = 0;
    while start > 0 && used + wire[start - 1].text.len() <= CELL_WIRE_BYTES {
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
