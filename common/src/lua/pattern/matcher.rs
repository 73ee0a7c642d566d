//! The Lua pattern matcher (the language of Lua 5.1's and gopher-lua's `string.find`,
//! `match`, `gmatch` and `gsub`), over bytes, with a step budget: the caller's `tick` runs
//! every [`STEPS_PER_TICK`] steps and may stop the match (the evaluation's deadline), so a
//! backtracking pattern cannot run past it inside a library call.

/// Most captures in one pattern, as in Lua.
pub(super) const MAX_CAPTURES: usize = 32;
/// Deepest recursion of the matcher ("pattern too complex" past it), as in Lua.
const MAX_DEPTH: usize = 200;
/// Matching steps between two calls of the budget check.
const STEPS_PER_TICK: u32 = 1024;

/// A capture: a byte range, or a position capture `()` (1-based position).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Capture {
    /// `(...)`: start and length; length `None` while the capture is open.
    Range(usize, Option<usize>),
    /// `()`: the position (0-based byte offset).
    Position(usize),
}

/// Why a match stopped without a result.
#[derive(Debug)]
pub(super) enum MatchError {
    /// The pattern is malformed; the message is Lua's.
    Pattern(String),
    /// The budget check said stop (its error is passed through).
    Stopped(mlua::Error),
}

/// One match attempt's state.
pub(super) struct Matcher<'a> {
    src: &'a [u8],
    pat: &'a [u8],
    depth: usize,
    steps: u32,
    tick: &'a dyn Fn() -> mlua::Result<()>,
    /// Captures of the last successful match.
    pub(super) captures: Vec<Capture>,
}

type Step = Result<Option<usize>, MatchError>;

fn malformed(message: &str) -> MatchError {
    MatchError::Pattern(message.to_string())
}

impl<'a> Matcher<'a> {
    /// A matcher of `pat` over `src`; `tick` is the budget check.
    pub(super) fn new(
        src: &'a [u8],
        pat: &'a [u8],
        tick: &'a dyn Fn() -> mlua::Result<()>,
    ) -> Self {
        Matcher {
            src,
            pat,
            depth: 0,
            steps: 0,
            tick,
            captures: Vec::new(),
        }
    }

    /// Tries to match the pattern (from byte `p` of it) at byte `s` of the subject; returns
    /// the end of the match.
    pub(super) fn match_at(&mut self, s: usize, p: usize) -> Step {
        self.captures.clear();
        self.depth = 0;
        self.do_match(s, p)
    }

    fn step(&mut self) -> Result<(), MatchError> {
        self.steps = self.steps.wrapping_add(1);
        if self.steps.is_multiple_of(STEPS_PER_TICK) {
            (self.tick)().map_err(MatchError::Stopped)?;
        }
        Ok(())
    }

    fn do_match(&mut self, s: usize, p: usize) -> Step {
        if self.depth >= MAX_DEPTH {
            return Err(malformed("pattern too complex"));
        }
        self.depth += 1;
        let result = self.do_match_inner(s, p);
        self.depth -= 1;
        result
    }

    fn do_match_inner(&mut self, mut s: usize, mut p: usize) -> Step {
        loop {
            self.step()?;
            if p == self.pat.len() {
                return Ok(Some(s));
            }
            match self.pat[p] {
                b'(' => {
                    return if self.pat.get(p + 1) == Some(&b')') {
                        self.start_capture(s, p + 2, true)
                    } else {
                        self.start_capture(s, p + 1, false)
                    };
                }
                b')' => return self.end_capture(s, p + 1),
                b'$' if p + 1 == self.pat.len() => {
                    return Ok((s == self.src.len()).then_some(s));
                }
                b'%' if self.pat.get(p + 1) == Some(&b'b') => {
                    let Some(end) = self.match_balance(s, p + 2)? else {
                        return Ok(None);
                    };
                    s = end;
                    p += 4;
                    continue;
                }
                b'%' if self.pat.get(p + 1) == Some(&b'f') => {
                    p += 2;
                    if self.pat.get(p) != Some(&b'[') {
                        return Err(malformed("missing '[' after '%f' in pattern"));
                    }
                    let end = self.class_end(p)?;
                    let prev = if s == 0 { 0 } else { self.src[s - 1] };
                    let cur = self.src.get(s).copied().unwrap_or(0);
                    if !self.match_class_set(prev, p, end - 1)
                        && self.match_class_set(cur, p, end - 1)
                    {
                        p = end;
                        continue;
                    }
                    return Ok(None);
                }
                b'%' if self.pat.get(p + 1).is_some_and(u8::is_ascii_digit) => {
                    let Some(end) = self.match_capture(s, self.pat[p + 1])? else {
                        return Ok(None);
                    };
                    s = end;
                    p += 2;
                    continue;
                }
                _ => {}
            }
            let ep = self.class_end(p)?;
            let matches_here = s < self.src.len() && self.single_match(self.src[s], p, ep);
            match self.pat.get(ep) {
                Some(b'?') => {
                    if matches_here && let Some(end) = self.do_match(s + 1, ep + 1)? {
                        return Ok(Some(end));
                    }
                    p = ep + 1;
                }
                Some(b'+') => {
                    return if matches_here {
                        self.max_expand(s + 1, p, ep)
                    } else {
                        Ok(None)
                    };
                }
                Some(b'*') => return self.max_expand(s, p, ep),
                Some(b'-') => return self.min_expand(s, p, ep),
                _ => {
                    if !matches_here {
                        return Ok(None);
                    }
                    s += 1;
                    p = ep;
                }
            }
        }
    }

    fn max_expand(&mut self, s: usize, p: usize, ep: usize) -> Step {
        let mut count = 0;
        while s + count < self.src.len() && self.single_match(self.src[s + count], p, ep) {
            count += 1;
        }
        loop {
            self.step()?;
            if let Some(end) = self.do_match(s + count, ep + 1)? {
                return Ok(Some(end));
            }
            if count == 0 {
                return Ok(None);
            }
            count -= 1;
        }
    }

    fn min_expand(&mut self, mut s: usize, p: usize, ep: usize) -> Step {
        loop {
            self.step()?;
            if let Some(end) = self.do_match(s, ep + 1)? {
                return Ok(Some(end));
            }
            if s < self.src.len() && self.single_match(self.src[s], p, ep) {
                s += 1;
            } else {
                return Ok(None);
            }
        }
    }

    fn start_capture(&mut self, s: usize, p: usize, position: bool) -> Step {
        if self.captures.len() >= MAX_CAPTURES {
            return Err(malformed("too many captures"));
        }
        self.captures.push(if position {
            Capture::Position(s)
        } else {
            Capture::Range(s, None)
        });
        let result = self.do_match(s, p)?;
        if result.is_none() {
            self.captures.pop();
        }
        Ok(result)
    }

    fn end_capture(&mut self, s: usize, p: usize) -> Step {
        let open = self
            .captures
            .iter()
            .rposition(|c| matches!(c, Capture::Range(_, None)))
            .ok_or_else(|| malformed("invalid pattern capture"))?;
        let Capture::Range(start, _) = self.captures[open] else {
            unreachable!("rposition found an open range")
        };
        self.captures[open] = Capture::Range(start, Some(s - start));
        let result = self.do_match(s, p)?;
        if result.is_none() {
            self.captures[open] = Capture::Range(start, None);
        }
        Ok(result)
    }

    fn match_balance(&mut self, s: usize, p: usize) -> Step {
        let (Some(&open), Some(&close)) = (self.pat.get(p), self.pat.get(p + 1)) else {
            return Err(malformed("malformed pattern (missing arguments to '%b')"));
        };
        if self.src.get(s) != Some(&open) {
            return Ok(None);
        }
        let mut depth = 1;
        let mut i = s + 1;
        while i < self.src.len() {
            self.step()?;
            let c = self.src[i];
            if c == close {
                depth -= 1;
                if depth == 0 {
                    return Ok(Some(i + 1));
                }
            } else if c == open {
                depth += 1;
            }
            i += 1;
        }
        Ok(None)
    }

    fn match_capture(&mut self, s: usize, digit: u8) -> Step {
        let index = usize::from(digit - b'0');
        let capture = index
            .checked_sub(1)
            .and_then(|i| self.captures.get(i))
            .copied();
        let Some(Capture::Range(start, Some(len))) = capture else {
            return Err(malformed(&format!("invalid capture index %{index}")));
        };
        let end = s + len;
        if end <= self.src.len() && self.src[start..start + len] == self.src[s..end] {
            Ok(Some(end))
        } else {
            Ok(None)
        }
    }

    /// The end of the single-character class starting at `p`.
    fn class_end(&self, mut p: usize) -> Result<usize, MatchError> {
        let c = self.pat[p];
        p += 1;
        if c == b'%' {
            if p >= self.pat.len() {
                return Err(malformed("malformed pattern (ends with '%')"));
            }
            return Ok(p + 1);
        }
        if c == b'[' {
            if self.pat.get(p) == Some(&b'^') {
                p += 1;
            }
            loop {
                // The first character of a set is never its end.
                let Some(&c) = self.pat.get(p) else {
                    return Err(malformed("malformed pattern (missing ']')"));
                };
                p += 1;
                if c == b'%' {
                    if p >= self.pat.len() {
                        return Err(malformed("malformed pattern (missing ']')"));
                    }
                    p += 1;
                }
                if self.pat.get(p) == Some(&b']') {
                    return Ok(p + 1);
                }
            }
        }
        Ok(p)
    }

    fn single_match(&self, c: u8, p: usize, ep: usize) -> bool {
        match self.pat[p] {
            b'.' => true,
            b'%' => class_matches(c, self.pat[p + 1]),
            b'[' => self.match_class_set(c, p, ep - 1),
            literal => literal == c,
        }
    }

    /// Whether `c` is in the set `[...]` from `p` (the `[`) to `ec` (the `]`).
    fn match_class_set(&self, c: u8, mut p: usize, ec: usize) -> bool {
        let mut negate = false;
        if self.pat[p + 1] == b'^' {
            negate = true;
            p += 1;
        }
        p += 1;
        while p < ec {
            let pc = self.pat[p];
            if pc == b'%' && p + 1 < ec {
                p += 1;
                if class_matches(c, self.pat[p]) {
                    return !negate;
                }
                p += 1;
            } else if p + 2 < ec && self.pat[p + 1] == b'-' {
                if pc <= c && c <= self.pat[p + 2] {
                    return !negate;
                }
                p += 3;
            } else {
                if pc == c {
                    return !negate;
                }
                p += 1;
            }
        }
        negate
    }
}

/// `%a`, `%d`, ... (upper case: the complement); any other letter is itself.
fn class_matches(c: u8, class: u8) -> bool {
    let matched = match class.to_ascii_lowercase() {
        b'a' => c.is_ascii_alphabetic(),
        b'c' => c.is_ascii_control(),
        b'd' => c.is_ascii_digit(),
        b'g' => c.is_ascii_graphic(),
        b'l' => c.is_ascii_lowercase(),
        b'p' => c.is_ascii_punctuation(),
        b's' => c.is_ascii_whitespace() || c == 0x0b,
        b'u' => c.is_ascii_uppercase(),
        b'w' => c.is_ascii_alphanumeric(),
        b'x' => c.is_ascii_hexdigit(),
        _ => return class == c,
    };
    if class.is_ascii_uppercase() {
        !matched
    } else {
        matched
    }
}

/// Whether the pattern has no special characters (a plain search suffices).
pub(super) fn is_plain(pat: &[u8]) -> bool {
    !pat.iter().any(|c| b"^$*+?.([%-".contains(c))
}
