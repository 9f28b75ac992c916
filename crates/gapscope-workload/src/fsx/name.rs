//! The rule for names that become folder names, CSV cells and table columns: the
//! experiment's and the variants' names when a run is made, and the same names read
//! back from a folder's meta.json before a report or an export derives a path from them.

/// Longest experiment or variant name.
pub const MAX_NAME: usize = 64;

/// 1 to 64 letters, digits, '-', '_' and '.', starting with a letter or digit (so never
/// `..`, a hidden folder, a path, a comma, a quote or a line break). `what` and `why`
/// make the message: `name "../x" is not allowed (it names the results folder)`.
pub fn check_name(what: &str, name: &str, why: &str) -> Result<(), String> {
    if is_safe(name) {
        Ok(())
    } else {
        Err(format!(
            "{what} {name:?} is not allowed ({why}): use 1 to {MAX_NAME} of the characters \
             A-Z a-z 0-9 - _ . starting with a letter or digit"
        ))
    }
}

/// Whether `name` passes [`check_name`].
pub fn is_safe(name: &str) -> bool {
    !name.is_empty()
        && name.len() <= MAX_NAME
        && name.starts_with(|c: char| c.is_ascii_alphanumeric())
        && name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || "-_.".contains(c))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn paths_hidden_names_and_separators_are_refused() {
        for bad in ["", "..", "../x", "a/b", ".hidden", "a,b", "a\nb", "-x", "é"] {
            assert!(!is_safe(bad), "{bad:?}");
        }
        assert!(!is_safe(&"a".repeat(MAX_NAME + 1)));
        for good in ["a", "quickstart", "v1.2_b-c", "20260101T000000Z-abcdef"] {
            assert!(is_safe(good), "{good:?}");
        }
        let e = check_name("name", "../x", "it names the results folder").unwrap_err();
        assert!(
            e.contains("\"../x\" is not allowed (it names the results folder)"),
            "{e}"
        );
    }
}
