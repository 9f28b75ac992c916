//! Commands given as one string (`gapscope run --cmd '…'`): run directly when they hold
//! no shell syntax (split into words as a shell splits simple quoting, like hyperfine's
//! `-N`), else through a shell told to `exec` its last command where it can, so that
//! the process gapscope measures (its CPU clock, its busy cores) is the command's, not
//! a shell waiting for it. Also the check that a command does not set
//! `GAPSCOPE_SPAN_FD`, which gapscope owns.

/// Words a shell may run as builtins only, with no program of the same name: `exec`
/// before them would fail or change what they do.
const BUILTINS_ONLY: [&str; 30] = [
    "cd", "exit", "return", "export", "unset", "set", "shift", "source", ".", "eval", "exec",
    "wait", "trap", "readonly", "local", "alias", "unalias", "ulimit", "umask", "read", "break",
    "continue", "times", "getopts", "hash", "type", "command", "builtin", "jobs", "declare",
];
/// Words that open or close a compound command: the last command is not a simple one.
const RESERVED: [&str; 16] = [
    "if", "then", "else", "elif", "fi", "for", "while", "until", "do", "done", "case", "esac", "{",
    "}", "!", "function",
];

/// Whether `command` holds nothing a shell would do more with than split it into words
/// (quotes and backslashes as a shell reads them): no operators, redirections,
/// expansions, globs, comments or leading assignments.
pub fn is_plain(command: &str) -> bool {
    let mut quote: Option<char> = None;
    let mut escaped = false;
    let mut word_start = true;
    let mut first_word = true;
    for c in command.chars() {
        if escaped {
            escaped = false;
            word_start = false;
            continue;
        }
        match quote {
            Some('\'') => {
                if c == '\'' {
                    quote = None;
                }
                continue;
            }
            Some(_) => {
                match c {
                    '"' => quote = None,
                    '$' | '`' | '\\' => return false,
                    _ => {}
                }
                continue;
            }
            None => {}
        }
        match c {
            '\\' => escaped = true,
            '\'' | '"' => {
                quote = Some(c);
                word_start = false;
            }
            ' ' | '\t' => {
                if !word_start {
                    first_word = false;
                }
                word_start = true;
            }
            '=' if first_word => return false,
            c if "|&;<>()$`*?[]#~{}\n\r!".contains(c) => return false,
            _ => word_start = false,
        }
    }
    quote.is_none() && !escaped
}

/// Whether `command` must go through a shell: it holds shell syntax, or names a builtin
/// that no program stands for (`exit 3`, `cd x`).
pub fn needs_shell(command: &str) -> bool {
    let first = command.split_whitespace().next().unwrap_or("");
    !is_plain(command) || BUILTINS_ONLY.contains(&first)
}

/// `script` with `exec ` before its last command, when that is a simple command a shell
/// can replace itself with (not a pipeline, a compound command, a backgrounded job, a
/// builtin or a function of the script); else `script` as it is.
pub fn exec_last(script: &str) -> String {
    if script.contains("<<") {
        return script.to_string(); // a here-document: its body is not shell syntax
    }
    let Some(start) = last_command(script) else {
        return script.to_string();
    };
    let tail = &script[start..];
    let words = words_of(tail);
    // Past leading assignments (`FOO=1 cmd`: `exec` goes after them, and they reach the
    // program through it).
    let Some(&(at, word)) = words.iter().find(|(_, w)| !is_assignment(w)) else {
        return script.to_string();
    };
    let defined = |name: &str| {
        let s = script.replace(' ', "");
        s.contains(&format!("{name}()")) || script.contains(&format!("function {name}"))
    };
    if RESERVED.contains(&word)
        || BUILTINS_ONLY.contains(&word)
        || word.starts_with('(')
        || defined(word)
    {
        return script.to_string();
    }
    let at = start + at;
    format!("{}exec {}", &script[..at], &script[at..])
}

/// Where the last command of `script` starts (a byte offset), or `None` when it cannot
/// be exec'd: a pipeline, a job put in the background, an unclosed quote or bracket.
fn last_command(script: &str) -> Option<usize> {
    let trimmed = script.trim_end();
    let trimmed = trimmed.strip_suffix(';').unwrap_or(trimmed).trim_end();
    let b = trimmed.as_bytes();
    let (mut quote, mut depth, mut i) = (None::<u8>, 0i32, 0usize);
    let (mut start, mut pipe_after_start) = (0usize, false);
    while i < b.len() {
        let c = b[i];
        match quote {
            Some(q) => {
                if c == b'\\' && q == b'"' {
                    i += 1;
                } else if c == q {
                    quote = None;
                }
            }
            None => match c {
                b'\\' => i += 1,
                b'\'' | b'"' | b'`' => quote = Some(c),
                b'(' | b'{' => depth += 1,
                b')' | b'}' => depth -= 1,
                b'#' if i == 0 || b[i - 1].is_ascii_whitespace() => {
                    // A comment runs to the end of its line.
                    while i < b.len() && b[i] != b'\n' {
                        i += 1;
                    }
                    continue;
                }
                b';' | b'\n' if depth == 0 => {
                    start = i + 1;
                    pipe_after_start = false;
                }
                b'&' | b'|' if depth == 0 => {
                    let double = b.get(i + 1) == Some(&c);
                    if double {
                        i += 1;
                        start = i + 1;
                        pipe_after_start = false;
                    } else if c == b'&' {
                        // `>&2`, `2>&1`: a redirection, not a separator.
                        let redirect = (i > 0 && (b[i - 1] == b'>' || b[i - 1] == b'<'))
                            || b.get(i + 1) == Some(&b'>');
                        if redirect {
                            i += 1;
                            continue;
                        }
                        start = i + 1;
                        pipe_after_start = false;
                        if trimmed[i + 1..].trim().is_empty() {
                            return None; // the last command runs in the background
                        }
                    } else {
                        pipe_after_start = true;
                    }
                }
                _ => {}
            },
        }
        i += 1;
    }
    if quote.is_some() || depth != 0 || pipe_after_start {
        return None;
    }
    let lead = trimmed[start..].len() - trimmed[start..].trim_start().len();
    Some(start + lead)
}

/// The words of a simple command with their offsets (quotes kept inside a word).
fn words_of(s: &str) -> Vec<(usize, &str)> {
    let b = s.as_bytes();
    let mut out = Vec::new();
    let (mut i, mut quote) = (0usize, None::<u8>);
    let mut begin: Option<usize> = None;
    while i < b.len() {
        let c = b[i];
        match quote {
            Some(q) if c == q => quote = None,
            Some(_) => {}
            None if c.is_ascii_whitespace() => {
                if let Some(a) = begin.take() {
                    out.push((a, &s[a..i]));
                }
            }
            None => {
                begin.get_or_insert(i);
                match c {
                    b'\'' | b'"' => quote = Some(c),
                    b'\\' => i += 1,
                    _ => {}
                }
            }
        }
        i += 1;
    }
    if let Some(a) = begin {
        out.push((a, &s[a..]));
    }
    out
}

/// `NAME=value` with a valid name.
fn is_assignment(word: &str) -> bool {
    word.split_once('=').is_some_and(|(name, _)| {
        !name.is_empty()
            && !name.starts_with(|c: char| c.is_ascii_digit())
            && name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_')
    })
}

/// A `GAPSCOPE_SPAN_FD=<number>` in `argv` (a word, or in a shell script), as the
/// message that refuses it; `None` when there is none.
pub fn span_fd_override(argv: &[String]) -> Option<String> {
    let key = format!("{}=", crate::emit::FD_ENV);
    for w in argv {
        let mut rest = w.as_str();
        while let Some(i) = rest.find(&key) {
            let value: String = rest[i + key.len()..]
                .chars()
                .take_while(char::is_ascii_digit)
                .collect();
            if !value.is_empty() {
                return Some(format!(
                    "the command sets {key}{value}: gapscope sets {fd} itself, to the pipe it \
                     reads span lines from (the emitters and the tracing layer write nothing \
                     when it names 0, 1 or 2, and gapscope reads no other descriptor). Remove \
                     it: span lines the program prints on stdout or stderr are read as well \
                     (`unset {fd}` makes the emitters write to stderr)",
                    fd = crate::emit::FD_ENV
                ));
            }
            rest = &rest[i + key.len()..];
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn plain_commands_have_no_shell_syntax() {
        for c in [
            "sort -n big.txt",
            "./bench 'a b' c",
            "x \"quoted arg\"",
            "a\\ b",
            "cmd --k=v",
        ] {
            assert!(is_plain(c), "{c}");
            assert!(!needs_shell(c), "{c}");
        }
        assert!(needs_shell("exit 3") && needs_shell("cd /tmp"));
        for c in [
            "a | b",
            "a && b",
            "a; b",
            "a > out",
            "echo $HOME",
            "ls *.txt",
            "FOO=1 ./bench",
            "echo \"$x\"",
            "cmd # note",
            "~/bin/x",
            "a &",
            "echo 'unclosed",
            "$(which x)",
        ] {
            assert!(!is_plain(c), "{c}");
        }
    }

    #[test]
    fn the_last_simple_command_is_execd() {
        let cases = [
            ("./bench > out.txt", "exec ./bench > out.txt"),
            ("cd sub && ./bench", "cd sub && exec ./bench"),
            ("make -q; ./bench 2>&1", "make -q; exec ./bench 2>&1"),
            ("FOO=1 BAR='a b' ./bench", "FOO=1 BAR='a b' exec ./bench"),
            ("a || b;", "a || exec b;"),
            ("echo $(date) ; sleep 0.1", "echo $(date) ; exec sleep 0.1"),
            ("x='a;b' y", "x='a;b' exec y"),
            ("./p &> log", "exec ./p &> log"),
        ];
        for (given, want) in cases {
            assert_eq!(exec_last(given), want, "{given}");
        }
        // Nothing to exec: a pipeline, a job in the background, compound commands,
        // builtins, functions of the script, here-documents.
        for same in [
            "a | b",
            "a &",
            "if x; then y; fi",
            "(a; b)",
            "{ a; b; }",
            "cd /tmp",
            "f() { sleep 1; }; f",
            "cat <<EOF\nx\nEOF",
            "for i in 1 2; do x; done",
        ] {
            assert_eq!(exec_last(same), same, "{same}");
        }
    }

    #[test]
    fn setting_the_span_fd_is_refused_with_what_to_do() {
        let argv = |s: &[&str]| s.iter().map(|w| w.to_string()).collect::<Vec<_>>();
        let why = span_fd_override(&argv(&["env", "GAPSCOPE_SPAN_FD=2", "./p"])).unwrap();
        assert!(why.contains("sets GAPSCOPE_SPAN_FD=2"), "{why}");
        assert!(why.contains("Remove it"), "{why}");
        assert!(span_fd_override(&argv(&["sh", "-c", "export GAPSCOPE_SPAN_FD=1; ./p"])).is_some());
        assert!(span_fd_override(&argv(&["sh", "-c", "GAPSCOPE_SPAN_FD=0 ./p"])).is_some());
        assert_eq!(
            span_fd_override(&argv(&["sh", "-c", "echo x >&$GAPSCOPE_SPAN_FD"])),
            None
        );
        assert_eq!(span_fd_override(&argv(&["./p", "--fd", "2"])), None);
    }
}
