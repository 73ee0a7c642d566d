//! `os.date`'s formats as gopher-lua has them: its `strftime` maps a fixed set of C
//! conversions onto Go layouts, and copies any other conversion through as written.
//!
//! The set, with what each writes (the Go layout gopher-lua uses in brackets):
//! `%A` weekday name, `%B` month name, `%b` month abbreviation, `%d` `%H` `%I` `%m` `%M`
//! `%S` two digits, `%F` `2006-01-02`, `%p` `AM`/`PM`, `%P` `am`/`pm`, `%w` weekday number
//! (0 is Sunday), `%X` `15:04:05`, `%y` two digits, `%Y` the year, `%z` `+hhmm`, `%Z` the
//! zone's abbreviation, `%%` a percent sign. Three differ from C, as they do in
//! gopher-lua: `%a` writes `mon` whatever the day (its layout "mon" is no Go layout
//! element), `%c` writes `02 Jan 06 15:04 MST` (day, month, two-digit year, hours and
//! minutes, zone), and `%x` writes the time as `15/04/05`. Any other conversion (`%j`,
//! `%e`, `%D`, ...) stays as written, `%` included, and so does a `%` ending the format.

use super::calendar::Civil;

const WEEKDAYS: [&str; 7] = [
    "Sunday",
    "Monday",
    "Tuesday",
    "Wednesday",
    "Thursday",
    "Friday",
    "Saturday",
];

const MONTHS: [&str; 12] = [
    "January",
    "February",
    "March",
    "April",
    "May",
    "June",
    "July",
    "August",
    "September",
    "October",
    "November",
    "December",
];

/// `format` with every conversion replaced by its part of `t`.
pub(crate) fn strftime(t: &Civil, format: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(format.len() * 2);
    let mut rest = format;
    while let Some((&byte, tail)) = rest.split_first() {
        rest = tail;
        if byte != b'%' {
            out.push(byte);
            continue;
        }
        match rest.split_first() {
            Some((&conversion, tail)) => {
                rest = tail;
                convert(t, conversion, &mut out);
            }
            // A `%` at the end stays.
            None => out.push(b'%'),
        }
    }
    out
}

/// Writes one conversion.
fn convert(t: &Civil, conversion: u8, out: &mut Vec<u8>) {
    let month = usize::from(t.month - 1);
    let text = match conversion {
        b'%' => "%".to_owned(),
        b'a' => "mon".to_owned(),
        b'A' => WEEKDAYS[usize::from(t.weekday)].to_owned(),
        b'b' => MONTHS[month][..3].to_owned(),
        b'B' => MONTHS[month].to_owned(),
        b'c' => format!(
            "{:02} {} {} {:02}:{:02} {}",
            t.day,
            &MONTHS[month][..3],
            short_year(t.year),
            t.hour,
            t.min,
            zone_name(t)
        ),
        b'd' => format!("{:02}", t.day),
        b'F' => format!("{}-{:02}-{:02}", long_year(t.year), t.month, t.day),
        b'H' => format!("{:02}", t.hour),
        b'I' => format!("{:02}", hour12(t.hour)),
        b'm' => format!("{:02}", t.month),
        b'M' => format!("{:02}", t.min),
        b'p' => if t.hour >= 12 { "PM" } else { "AM" }.to_owned(),
        b'P' => if t.hour >= 12 { "pm" } else { "am" }.to_owned(),
        b'S' => format!("{:02}", t.sec),
        b'w' => t.weekday.to_string(),
        b'x' => format!("{:02}/{:02}/{:02}", t.hour, t.min, t.sec),
        b'X' => format!("{:02}:{:02}:{:02}", t.hour, t.min, t.sec),
        b'y' => short_year(t.year),
        b'Y' => long_year(t.year),
        b'z' => numeric_zone(t.offset),
        b'Z' => zone_name(t),
        other => {
            out.extend_from_slice(&[b'%', other]);
            return;
        }
    };
    out.extend_from_slice(text.as_bytes());
}

/// An integer padded with zeros to `width` digits, the sign before them (Go's `appendInt`).
fn padded(n: i64, width: usize) -> String {
    let sign = if n < 0 { "-" } else { "" };
    format!("{sign}{:0width$}", n.unsigned_abs())
}

/// Go's `06`: the last two digits of the year (of its absolute value before year 0).
fn short_year(year: i64) -> String {
    format!("{:02}", year.unsigned_abs() % 100)
}

/// Go's `2006`: the year, at least four digits.
fn long_year(year: i64) -> String {
    padded(year, 4)
}

fn hour12(hour: u8) -> u8 {
    match hour % 12 {
        0 => 12,
        h => h,
    }
}

/// Go's `-0700`: the offset in hours and minutes (seconds dropped).
fn numeric_zone(offset: i32) -> String {
    let minutes = offset / 60;
    let sign = if minutes < 0 { '-' } else { '+' };
    let minutes = minutes.unsigned_abs();
    format!("{sign}{:02}{:02}", minutes / 60, minutes % 60)
}

/// Go's `MST`: the zone's abbreviation, or its numeric offset when it has none.
fn zone_name(t: &Civil) -> String {
    if t.zone.is_empty() {
        numeric_zone(t.offset)
    } else {
        t.zone.clone()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn text(t: &Civil, format: &str) -> String {
        String::from_utf8(strftime(t, format.as_bytes())).unwrap()
    }

    #[test]
    fn zones_and_years_print_as_go_layouts_do() {
        let paris = Civil::at(1_709_210_096, 3600, "CET");
        assert_eq!(text(&paris, "%z %Z %c"), "+0100 CET 29 Feb 24 13:34 CET");
        let unnamed = Civil::at(0, -(5 * 3600 + 30 * 60 + 15), "");
        assert_eq!(text(&unnamed, "%z %Z"), "-0530 -0530");
        let ancient = Civil::at(-62_000_000_000, 0, "UTC");
        assert_eq!(text(&ancient, "%Y %y %F"), "0005 05 0005-04-19");
        let before_year_zero = Civil::at(-62_200_000_000, 0, "UTC");
        assert_eq!(text(&before_year_zero, "%Y %y"), "-0002 02");
    }

    #[test]
    fn the_twelve_hour_clock_runs_from_12_to_11() {
        for (hour, text_12h) in [
            (0, "12 AM am"),
            (1, "01 AM am"),
            (12, "12 PM pm"),
            (23, "11 PM pm"),
        ] {
            let t = Civil::at(hour * 3600, 0, "UTC");
            assert_eq!(text(&t, "%I %p %P"), text_12h, "{hour}");
        }
    }

    #[test]
    fn unknown_conversions_and_a_trailing_percent_stay_as_written() {
        let t = Civil::at(0, 0, "UTC");
        assert_eq!(text(&t, "%j %e %D %% 100%"), "%j %e %D % 100%");
        assert_eq!(text(&t, "é%é"), "é%é");
    }
}
