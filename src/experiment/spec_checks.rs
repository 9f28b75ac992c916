//! The experiment file's words: names that name folders and cells, revisions, and
//! TOML errors with their line and column.

/// The toml crate's message carries line/column and a caret; keep it, and add the
/// valid choices where serde gave them.
pub(super) fn describe_toml_error(_text: &str, err: &toml::de::Error) -> String {
    let mut msg = err.to_string();
    if let Some(span) = err.span() {
        let (line, col) = line_col(_text, span.start);
        if !msg.contains("line") {
            msg = format!("line {line}, column {col}: {msg}");
        }
    }
    msg.trim_end().to_string()
}

fn line_col(text: &str, offset: usize) -> (usize, usize) {
    let before = &text[..offset.min(text.len())];
    let line = before.matches('\n').count() + 1;
    let col = before.len() - before.rfind('\n').map(|p| p + 1).unwrap_or(0) + 1;
    (line, col)
}

/// Longest experiment or variant name.
const MAX_NAME: usize = 64;

/// Experiment and variant names name folders, CSV cells and table columns: 1 to 64
/// letters, digits, '-', '_' and '.', starting with a letter or digit (so never `..`, a
/// hidden folder, a path, a comma, a quote or a line break).
pub(crate) fn check_name(what: &str, name: &str, why: &str) -> Result<(), String> {
    let ok = !name.is_empty()
        && name.len() <= MAX_NAME
        && name.starts_with(|c: char| c.is_ascii_alphanumeric())
        && name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || "-_.".contains(c));
    if ok {
        Ok(())
    } else {
        Err(format!(
            "{what} {name:?} is not allowed ({why}): use 1 to {MAX_NAME} of the characters \
             A-Z a-z 0-9 - _ . starting with a letter or digit"
        ))
    }
}

/// A variant's `rev` names a revision; `repo` goes with a `rev`.
pub(super) fn check_rev(name: &str, rev: Option<&str>, has_repo: bool) -> Result<(), String> {
    match rev {
        Some(r) if r.trim().is_empty() || r.starts_with('-') => Err(format!(
            "variant {name:?}: rev = {r:?} is not a revision: give a commit id, tag or branch"
        )),
        None if has_repo => Err(format!(
            "variant {name:?}: repo is the repository of a `rev`; add rev = \"COMMIT\" (or remove repo)"
        )),
        _ => Ok(()),
    }
}
