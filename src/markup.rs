//! Text from a run folder (span names, thread names, knobs, errors, command lines) in
//! Markdown and HTML: the one escaping of the report's report.md and of `gapscope diff
//! --format markdown`. A span name can then neither open a link or an image, nor carry
//! HTML, nor break a table, nor reorder the text around it with bidirectional controls.
//! A leaf: it depends on nothing in the crate.

/// `s` as inline Markdown text: `&` and `<` as entities (no HTML tag, no autolink, no
/// entity that spells a control; a `>` alone opens nothing inside a line), `|` escaped (a table cell stays one cell), `](` and
/// `][` broken (no inline or reference link or image), line breaks and other control
/// characters as spaces, and the invisible characters that reorder or hide text
/// (bidirectional controls, zero-width marks) shown as `⟨U+202E⟩`. Emphasis characters
/// and brackets alone are left as they are: they cannot reach outside the text.
pub fn md_text(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    let mut prev = '\0';
    for c in s.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '|' => out.push_str("\\|"),
            '(' | '[' if prev == ']' => {
                out.push('\\');
                out.push(c);
            }
            c if c.is_control() => out.push(' '),
            c if is_invisible_format(c) => {
                out.push_str(&format!("⟨U+{:04X}⟩", c as u32));
            }
            c => out.push(c),
        }
        prev = c;
    }
    out
}

/// Characters that change the order or the visibility of the text around them: the
/// bidirectional embeddings, overrides, isolates and marks, zero-width spaces and
/// joiners, the word joiner and invisible operators, and the byte-order mark.
fn is_invisible_format(c: char) -> bool {
    matches!(c as u32,
        0x061C | 0x200B..=0x200F | 0x202A..=0x202E | 0x2060..=0x2069 | 0xFEFF)
}

/// `s` as an inline code span: delimited by one backtick more than its longest run of
/// backticks, so that nothing inside ends it (control and invisible characters as in
/// [`md_text`]; inside code, `|` still splits a table cell, so it stays escaped).
pub fn md_code(s: &str) -> String {
    let clean: String = s
        .chars()
        .map(|c| if c.is_control() { ' ' } else { c })
        .collect();
    let clean = show_invisible(&clean);
    let ticks = "`".repeat(longest_run(&clean, '`') + 1);
    // A span that starts or ends with a backtick needs a space inside the delimiters.
    let pad = if clean.starts_with('`') || clean.ends_with('`') {
        " "
    } else {
        ""
    };
    format!("{ticks}{pad}{clean}{pad}{ticks}")
}

/// `s` as an inline code span inside a table cell ([`md_code`] with its pipes escaped:
/// a table row is split at its pipes before the code span is read, and `\|` is a pipe
/// inside it).
pub fn md_code_cell(s: &str) -> String {
    md_code(s).replace('|', "\\|")
}

/// A fenced code block of `body` with info string `lang`: the fence is one backtick
/// longer than the longest run of backticks in the body (at least three), so that no
/// line of the body closes it.
pub fn md_fence(lang: &str, body: &str) -> String {
    let body = show_invisible(body);
    let fence = "`".repeat((longest_run(&body, '`') + 1).max(3));
    format!("{fence}{lang}\n{}\n{fence}", body.trim_end())
}

fn show_invisible(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for c in s.chars() {
        if is_invisible_format(c) {
            out.push_str(&format!("⟨U+{:04X}⟩", c as u32));
        } else {
            out.push(c);
        }
    }
    out
}

fn longest_run(s: &str, c: char) -> usize {
    let (mut best, mut run) = (0, 0);
    for x in s.chars() {
        run = if x == c { run + 1 } else { 0 };
        best = best.max(run);
    }
    best
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn links_html_tables_and_bidi_controls_are_neutralised() {
        assert_eq!(
            md_text("[click](https://x.example)"),
            "[click]\\(https://x.example)"
        );
        assert_eq!(md_text("![img][ref]"), "![img]\\[ref]");
        assert_eq!(
            md_text("<script>alert(1)</script>"),
            "&lt;script>alert(1)&lt;/script>"
        );
        assert_eq!(md_text("&#x202E;"), "&amp;#x202E;");
        assert_eq!(md_text("a|b\nc"), "a\\|b c");
        assert_eq!(md_text("abc\u{202E}fed"), "abc⟨U+202E⟩fed");
        assert_eq!(md_text("gpu_prove[*] · total"), "gpu_prove[*] · total");
        assert_eq!(md_text("−1.2% [−3.0%, +0.5%]"), "−1.2% [−3.0%, +0.5%]");
    }

    #[test]
    fn code_spans_and_fences_outlast_the_backticks_inside() {
        assert_eq!(md_code("cargo run"), "`cargo run`");
        assert_eq!(md_code("a`b"), "``a`b``");
        assert_eq!(md_code("`x`"), "`` `x` ``");
        assert_eq!(md_code_cell("a|`b"), "``a\\|`b``");
        assert_eq!(
            md_code("x`</code><img src=x onerror=alert(1)>"),
            "``x`</code><img src=x onerror=alert(1)>``"
        );
        let f = md_fence("toml", "name = \"x\"\n```\n# injected\n");
        assert!(f.starts_with("````toml\n") && f.ends_with("\n````"), "{f}");
        assert_eq!(md_fence("sh", "ls"), "```sh\nls\n```");
    }
}

/// `s` with every control character (escape sequences' ESC, carriage returns, newlines,
/// bell, …) written as a visible escape (`\x1b`, `\r`, `\n`): text read from a run folder
/// or a history database can then never set a terminal's title or clear its screen.
pub fn terminal_safe(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for c in s.chars() {
        match c {
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            c if c.is_control() => out.push_str(&format!("\\x{:02x}", c as u32)),
            c => out.push(c),
        }
    }
    out
}

/// Text of many lines for a terminal: [`terminal_safe`] on each line, the line breaks
/// kept.
pub fn terminal_text(s: &str) -> String {
    s.split('\n')
        .map(terminal_safe)
        .collect::<Vec<_>>()
        .join("\n")
}

#[cfg(test)]
mod terminal_tests {
    use super::{terminal_safe, terminal_text};

    #[test]
    fn line_breaks_stay_in_terminal_text() {
        assert_eq!(terminal_text("a\x1b[2J\nb\n"), "a\\x1b[2J\nb\n");
    }

    #[test]
    fn control_characters_are_shown_not_obeyed() {
        assert_eq!(terminal_safe("plain µs name"), "plain µs name");
        assert_eq!(terminal_safe("\x1b]0;owned\x07"), "\\x1b]0;owned\\x07");
        assert_eq!(terminal_safe("a\nb\r\x1b[2J"), "a\\nb\\r\\x1b[2J");
        assert_eq!(terminal_safe("\u{9b}31m"), "\\x9b31m");
    }
}
