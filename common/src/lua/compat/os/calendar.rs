//! Calendar arithmetic for the `os` date functions as Go's `time` package does it
//! (gopher-lua's `os.time` is Go's `time.Date`, its `os.date` reads Go's `time.Unix`):
//! day numbers to civil dates and back on the proleptic Gregorian calendar, with
//! `time.Date`'s normalisation of out-of-range fields (month 13 is January of the next
//! year, day 0 the last day of the month before, second 60 the next minute).

/// Seconds in a day.
const DAY: i128 = 86_400;

/// A moment broken down in a time zone: what `os.date` formats.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Civil {
    /// The year (astronomical: 0 is 1 BC).
    pub(crate) year: i64,
    /// 1 to 12.
    pub(crate) month: u8,
    /// 1 to 31.
    pub(crate) day: u8,
    /// 0 to 23.
    pub(crate) hour: u8,
    /// 0 to 59.
    pub(crate) min: u8,
    /// 0 to 59.
    pub(crate) sec: u8,
    /// 0 (Sunday) to 6 (Saturday), as Go's `Weekday`.
    pub(crate) weekday: u8,
    /// Seconds east of UTC.
    pub(crate) offset: i32,
    /// The zone's abbreviation ("UTC", "CET"), empty when it has none.
    pub(crate) zone: String,
}

impl Civil {
    /// The moment `unix` (seconds since 1970-01-01T00:00:00Z) at `offset` seconds east
    /// of UTC, in the zone named `zone`.
    pub(crate) fn at(unix: i64, offset: i32, zone: &str) -> Civil {
        let local = i128::from(unix) + i128::from(offset);
        let days = local.div_euclid(DAY);
        let second_of_day = local.rem_euclid(DAY);
        let (year, month, day) = civil_from_days(days);
        let narrow = |n: i128| u8::try_from(n).expect("a time-of-day field fits a byte");
        Civil {
            year,
            month,
            day,
            hour: narrow(second_of_day / 3600),
            min: narrow(second_of_day / 60 % 60),
            sec: narrow(second_of_day % 60),
            // 1970-01-01 was a Thursday.
            weekday: narrow((days + 4).rem_euclid(7)),
            offset,
            zone: zone.to_owned(),
        }
    }
}

/// The fields of a date table, as `os.time` reads them.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Fields {
    pub(crate) year: i64,
    pub(crate) month: i64,
    pub(crate) day: i64,
    pub(crate) hour: i64,
    pub(crate) min: i64,
    pub(crate) sec: i64,
}

impl Fields {
    /// Seconds since the epoch of this wall time read as UTC, every field normalised into
    /// the next larger one as Go's `time.Date` does (which amounts to adding them up).
    pub(crate) fn wall_seconds(&self) -> i128 {
        let month0 = i128::from(self.month) - 1;
        let year = i128::from(self.year) + month0.div_euclid(12);
        let days = days_from_civil(year, month0.rem_euclid(12) + 1) + i128::from(self.day) - 1;
        days * DAY + i128::from(self.hour) * 3600 + i128::from(self.min) * 60 + i128::from(self.sec)
    }
}

/// Days from 1970-01-01 to the first of `month` (1 to 12) of `year`.
fn days_from_civil(year: i128, month: i128) -> i128 {
    // Howard Hinnant's algorithm, over years that start in March.
    let year = if month <= 2 { year - 1 } else { year };
    let era = year.div_euclid(400);
    let year_of_era = year - era * 400;
    let shifted_month = if month > 2 { month - 3 } else { month + 9 };
    let day_of_year = (153 * shifted_month + 2) / 5;
    let day_of_era = year_of_era * 365 + year_of_era / 4 - year_of_era / 100 + day_of_year;
    era * 146_097 + day_of_era - 719_468
}

/// The civil date `days` after 1970-01-01 (Hinnant's inverse).
fn civil_from_days(days: i128) -> (i64, u8, u8) {
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let day_of_era = z - era * 146_097;
    let year_of_era =
        (day_of_era - day_of_era / 1460 + day_of_era / 36_524 - day_of_era / 146_096) / 365;
    let day_of_year = day_of_era - (365 * year_of_era + year_of_era / 4 - year_of_era / 100);
    let shifted_month = (5 * day_of_year + 2) / 153;
    let day = day_of_year - (153 * shifted_month + 2) / 5 + 1;
    let month = if shifted_month < 10 {
        shifted_month + 3
    } else {
        shifted_month - 9
    };
    let year = year_of_era + era * 400 + i128::from(month <= 2);
    // From an i64 of seconds, the year is within ±3e11.
    let year = i64::try_from(year).expect("a year from i64 seconds fits i64");
    let narrow = |n: i128| u8::try_from(n).expect("a month or day fits a byte");
    (year, narrow(month), narrow(day))
}

#[cfg(test)]
pub(super) mod tests {
    use super::*;

    /// The fields of a date and time, for tests.
    pub(in crate::lua::compat::os) fn fields(
        year: i64,
        month: i64,
        day: i64,
        hour: i64,
        min: i64,
        sec: i64,
    ) -> Fields {
        Fields {
            year,
            month,
            day,
            hour,
            min,
            sec,
        }
    }

    #[test]
    fn civil_dates_round_trip_across_leap_years_and_centuries() {
        for days in [
            -800_000i128,
            -719_468,
            -1,
            0,
            1,
            59,
            60,
            11_016,
            19_782,
            2_932_896,
        ] {
            let (y, m, d) = civil_from_days(days);
            assert_eq!(
                days_from_civil(y.into(), m.into()) + i128::from(d) - 1,
                days
            );
        }
        assert_eq!(civil_from_days(0), (1970, 1, 1));
        assert_eq!(civil_from_days(11_016), (2000, 2, 29));
        assert_eq!(civil_from_days(-1), (1969, 12, 31));
    }

    #[test]
    fn out_of_range_fields_carry_into_the_next_larger_one_as_go_time_date_does() {
        let plain = fields(2024, 1, 1, 0, 0, 0).wall_seconds();
        assert_eq!(plain, 1_704_067_200);
        assert_eq!(fields(2023, 13, 1, 0, 0, 0).wall_seconds(), plain);
        assert_eq!(fields(2024, 0, 1, 0, 0, 0).wall_seconds(), 1_701_388_800);
        assert_eq!(fields(2024, 3, 0, 0, 0, 0).wall_seconds(), 1_709_164_800);
        assert_eq!(fields(2023, 12, 31, 23, 59, 60).wall_seconds(), plain);
        assert_eq!(fields(2024, 1, 1, -1, 0, 0).wall_seconds(), plain - 3600);
    }

    #[test]
    fn a_moment_breaks_down_with_its_weekday_and_offset() {
        let t = Civil::at(1_709_210_096, 3600, "CET");
        assert_eq!(
            (t.year, t.month, t.day, t.hour, t.min, t.sec, t.weekday),
            (2024, 2, 29, 13, 34, 56, 4)
        );
        let before = Civil::at(-1, 0, "UTC");
        assert_eq!((before.year, before.hour, before.weekday), (1969, 23, 3));
        let far = Civil::at(i64::MAX, 0, "UTC");
        assert!(far.year > 292_000_000_000);
    }
}
