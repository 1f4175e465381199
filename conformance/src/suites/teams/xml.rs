//! A strict reader of the injected `<teammate-message>` block: it parses the elements the way an
//! XML parser would (attribute values in double quotes, entities decoded, no raw `<` or `&` in text
//! or values) so a check compares meaning, never bytes.

use std::collections::BTreeMap;

/// One parsed `<teammate-message>` element.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Element {
    /// Attributes in document order, decoded.
    pub attributes: Vec<(String, String)>,
    /// The text content, decoded and trimmed of the newline after the start tag and before the end tag.
    pub text: String,
}

impl Element {
    /// The decoded value of attribute `name`.
    pub fn attribute(&self, name: &str) -> Option<&str> {
        self.attributes
            .iter()
            .find(|(n, _)| n == name)
            .map(|(_, v)| v.as_str())
    }
}

fn decode(raw: &str, in_attribute: bool) -> Result<String, String> {
    let entities: BTreeMap<&str, char> = [
        ("amp", '&'),
        ("lt", '<'),
        ("gt", '>'),
        ("quot", '"'),
        ("apos", '\''),
    ]
    .into_iter()
    .collect();
    let mut out = String::new();
    let mut rest = raw;
    while let Some(c) = rest.chars().next() {
        match c {
            '&' => {
                let end = rest
                    .find(';')
                    .ok_or_else(|| format!("unterminated entity in {raw:?}"))?;
                let name = &rest[1..end];
                let value = entities
                    .get(name)
                    .ok_or_else(|| format!("unknown entity &{name}; in {raw:?}"))?;
                out.push(*value);
                rest = &rest[end + 1..];
            }
            '<' => return Err(format!("raw '<' in {raw:?}")),
            '"' if in_attribute => return Err(format!("raw '\"' in attribute value {raw:?}")),
            c => {
                out.push(c);
                rest = &rest[c.len_utf8()..];
            }
        }
    }
    Ok(out)
}

/// Parses a block of zero or more `<teammate-message>` elements separated by whitespace.
pub fn parse_block(block: &str) -> Result<Vec<Element>, String> {
    const OPEN: &str = "<teammate-message";
    const CLOSE: &str = "</teammate-message>";
    let mut elements = Vec::new();
    let mut rest = block.trim_start();
    while !rest.is_empty() {
        rest = rest.strip_prefix(OPEN).ok_or_else(|| {
            format!(
                "expected {OPEN} at {:?}",
                rest.chars().take(40).collect::<String>()
            )
        })?;
        let mut attributes = Vec::new();
        loop {
            rest = rest.trim_start();
            if let Some(after) = rest.strip_prefix('>') {
                rest = after;
                break;
            }
            let eq = rest.find('=').ok_or("attribute without '='")?;
            let name = rest[..eq].trim().to_owned();
            if name.is_empty() || !name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_') {
                return Err(format!("bad attribute name {name:?}"));
            }
            rest = rest[eq + 1..]
                .strip_prefix('"')
                .ok_or_else(|| format!("attribute {name} is not in double quotes"))?;
            let end = rest.find('"').ok_or("unterminated attribute value")?;
            attributes.push((name, decode(&rest[..end], true)?));
            rest = &rest[end + 1..];
        }
        let end = rest.find(CLOSE).ok_or("missing </teammate-message>")?;
        let raw = &rest[..end];
        let raw = raw.strip_prefix('\n').unwrap_or(raw);
        let raw = raw.strip_suffix('\n').unwrap_or(raw);
        elements.push(Element {
            attributes,
            text: decode(raw, false)?,
        });
        rest = rest[end + CLOSE.len()..].trim_start();
    }
    Ok(elements)
}
