//! One Table cell: the column's JSONPath evaluated on the object, formatted by the
//! column's type the way the Kubernetes API server formats custom resource columns.

use crate::resources::PrinterColumn;
use jsonpath_rust::JsonPath;
use k8s_openapi::jiff::Timestamp;
use serde_json::Value;

/// The cell for `column` of `obj`: `null` (kubectl prints `<none>`) when the path finds
/// nothing or the value does not fit the column's type.
pub fn value(obj: &Value, column: &PrinterColumn, now: Timestamp) -> Value {
    let path = format!("${}", column.json_path.trim_start_matches('$'));
    let Some(found) = obj.query(&path).ok().and_then(|r| r.first().copied()) else {
        return Value::Null;
    };
    match column.type_.as_str() {
        "date" => found
            .as_str()
            .and_then(|s| s.parse::<Timestamp>().ok())
            .map_or(Value::Null, |t| {
                human_duration(now.as_second() - t.as_second()).into()
            }),
        "integer" if found.is_i64() || found.is_u64() => found.clone(),
        "number" if found.is_number() => found.clone(),
        "boolean" if found.is_boolean() => found.clone(),
        "integer" | "number" | "boolean" => Value::Null,
        _ => match found {
            Value::String(s) => s.clone().into(),
            Value::Null => Value::Null,
            other => other.to_string().into(),
        },
    }
}

/// An age in seconds as Kubernetes prints it: `45s`, `3m12s`, `25m`, `5h3m`, `20h`,
/// `3d4h`, `30d`, `2y45d`, `9y`.
pub fn human_duration(seconds: i64) -> String {
    if seconds < -1 {
        return "<invalid>".into();
    }
    let s = seconds.max(0);
    if s < 120 {
        return format!("{s}s");
    }
    let (minutes, hours) = (s / 60, s / 3600);
    let days = hours / 24;
    let with = |big: i64, unit: &str, small: i64, small_unit: &str| {
        if small == 0 {
            format!("{big}{unit}")
        } else {
            format!("{big}{unit}{small}{small_unit}")
        }
    };
    match () {
        () if minutes < 10 => with(minutes, "m", s % 60, "s"),
        () if minutes < 180 => format!("{minutes}m"),
        () if hours < 8 => with(hours, "h", minutes % 60, "m"),
        () if hours < 48 => format!("{hours}h"),
        () if hours < 24 * 8 => with(days, "d", hours % 24, "h"),
        () if days < 365 * 2 => format!("{days}d"),
        () if days < 365 * 8 => with(days / 365, "y", days % 365, "d"),
        () => format!("{}y", days / 365),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn column(type_: &str, path: &str) -> PrinterColumn {
        PrinterColumn {
            name: "C".into(),
            type_: type_.into(),
            format: String::new(),
            description: String::new(),
            priority: 0,
            json_path: path.into(),
        }
    }

    #[test]
    fn filter_paths_pick_the_condition_and_dates_become_ages() {
        let now: Timestamp = "2026-01-01T01:00:00Z".parse().unwrap();
        let obj = json!({"status": {"replicas": 3, "conditions": [
            {"type": "Reachable", "status": "True", "lastTransitionTime": "2026-01-01T00:55:00Z"},
            {"type": "Healthy", "status": "False", "lastTransitionTime": "2026-01-01T00:00:00Z"}]}});
        let healthy = r#".status.conditions[?(@.type=="Healthy")]"#;
        let cell = |t, p: &str| value(&obj, &column(t, p), now);
        assert_eq!(cell("string", &format!("{healthy}.status")), "False");
        assert_eq!(
            cell("date", &format!("{healthy}.lastTransitionTime")),
            "60m"
        );
        assert_eq!(
            cell(
                "date",
                r#".status.conditions[?(@.type=="Reachable")].lastTransitionTime"#
            ),
            "5m"
        );
        assert_eq!(cell("integer", ".status.replicas"), 3);
        assert_eq!(cell("string", ".status.missing"), Value::Null);
        assert_eq!(cell("integer", ".status.conditions"), Value::Null);
    }

    #[test]
    fn ages_read_like_kubectl() {
        let cases = [
            (45, "45s"),
            (119, "119s"),
            (192, "3m12s"),
            (600, "10m"),
            (3 * 3600 + 60, "3h1m"),
            (20 * 3600, "20h"),
            (3 * 86400 + 4 * 3600, "3d4h"),
            (30 * 86400, "30d"),
            (-5, "<invalid>"),
        ];
        for (s, want) in cases {
            assert_eq!(human_duration(s), want, "{s}s");
        }
    }
}
