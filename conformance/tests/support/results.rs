//! Reading what a `ski-conformance` run wrote: the rows of its `results.json`.

use std::path::Path;

/// Each row of the `results.json` a run wrote to `out`: its id, its outcome and its failure (as
/// JSON text, `null` for none), in the file's order.
pub fn row_outcomes(out: &Path) -> Vec<(String, String, String)> {
    let text = std::fs::read_to_string(out.join("results.json")).expect("results.json");
    let results: serde_json::Value = serde_json::from_str(&text).expect("results are JSON");
    results["results"]
        .as_array()
        .expect("results")
        .iter()
        .map(|r| {
            (
                r["id"].as_str().unwrap_or_default().to_owned(),
                r["outcome"].as_str().unwrap_or_default().to_owned(),
                r["failure"].to_string(),
            )
        })
        .collect()
}
