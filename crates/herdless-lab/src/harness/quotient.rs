//! A ratio of two medians as the lab stores it: a value (`∞` included) or
//! `0/0`, written to JSON as a number, `"inf"`, `"-inf"` or `"0/0"`.

use serde::{Deserialize, Deserializer, Serialize, Serializer};

/// A ratio of two medians.
///
/// A zero denominator is not missing data: `x/0` with `x > 0` is
/// `Value(∞)` (the denominator variant never did what the numerator did,
/// e.g. the "after" variant never contended: the best result), and `0/0`
/// is [`Quotient::BothZero`] (neither did: nothing to compare). In JSON: a
/// number, `"inf"`, `"-inf"` or `"0/0"`.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Quotient {
    /// `num / den`, infinite when `den` is 0 and `num` is not.
    Value(f64),
    /// Both medians are 0.
    BothZero,
}

impl Quotient {
    /// `num / den` of two medians.
    pub fn of(num: f64, den: f64) -> Quotient {
        if num == 0.0 && den == 0.0 {
            Quotient::BothZero
        } else {
            Quotient::Value(num / den)
        }
    }

    /// The value, if there is one (`∞` included, `0/0` not).
    pub fn value(self) -> Option<f64> {
        match self {
            Quotient::Value(v) => Some(v),
            Quotient::BothZero => None,
        }
    }
}

impl Serialize for Quotient {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        match *self {
            Quotient::Value(v) if v.is_finite() => s.serialize_f64(v),
            Quotient::Value(v) if v > 0.0 => s.serialize_str("inf"),
            Quotient::Value(_) => s.serialize_str("-inf"),
            Quotient::BothZero => s.serialize_str("0/0"),
        }
    }
}

impl<'de> Deserialize<'de> for Quotient {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        #[derive(Deserialize)]
        #[serde(untagged)]
        enum Raw {
            Number(f64),
            Text(String),
        }
        match Raw::deserialize(d)? {
            Raw::Number(v) => Ok(Quotient::Value(v)),
            Raw::Text(t) => match t.as_str() {
                "inf" => Ok(Quotient::Value(f64::INFINITY)),
                "-inf" => Ok(Quotient::Value(f64::NEG_INFINITY)),
                "0/0" => Ok(Quotient::BothZero),
                other => Err(serde::de::Error::custom(format!(
                    "ratio value \"{other}\" (expected a number, \"inf\", \"-inf\" or \"0/0\")"
                ))),
            },
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_zero_denominator_is_infinite_and_both_zero_is_its_own_value() {
        assert_eq!(Quotient::of(3.0, 0.0), Quotient::Value(f64::INFINITY));
        assert_eq!(Quotient::of(0.0, 0.0), Quotient::BothZero);
        assert_eq!(Quotient::of(0.0, 2.0), Quotient::Value(0.0));
        assert_eq!(Quotient::of(3.0, 0.0).value(), Some(f64::INFINITY));
    }

    #[test]
    fn quotients_round_trip_through_json() {
        let values = vec![
            Some(Quotient::Value(1.5)),
            Some(Quotient::Value(f64::INFINITY)),
            Some(Quotient::Value(f64::NEG_INFINITY)),
            Some(Quotient::BothZero),
            None,
        ];
        let text = serde_json::to_string(&values).unwrap();
        assert_eq!(text, r#"[1.5,"inf","-inf","0/0",null]"#);
        let back: Vec<Option<Quotient>> = serde_json::from_str(&text).unwrap();
        assert_eq!(back, values);
        let err = serde_json::from_str::<Quotient>(r#""nan""#).unwrap_err();
        assert!(err.to_string().contains("\"nan\""), "{err}");
    }
}
