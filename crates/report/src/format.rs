//! Fixed-precision numbers for CSV cells, computed in integers so the text is the same on every
//! machine: no float is ever formatted into a report file.

/// Thousandths (token-equivalents are kept so) as `1234.567`.
pub(crate) fn thousandths(value: u64) -> String {
    format!("{}.{:03}", value / 1000, value % 1000)
}

/// `numerator ÷ denominator` as a fraction with four decimals (a percent's two), rounded half
/// away from zero; `0.0000` when the denominator is 0. Files hold fractions; tables for people
/// print percents.
pub(crate) fn fraction(numerator: i128, denominator: u128) -> String {
    fixed(numerator, denominator, 4)
}

/// Nano-dollars as dollars with nine decimals: exact, no float formatted.
pub(crate) fn usd(nanousd: u64) -> String {
    fixed(i128::from(nanousd), 1_000_000_000, 9)
}

/// Nano-dollars as dollars for people to read: `$0.0934` (four decimals, rounded).
pub(crate) fn dollars(nanousd: u64) -> String {
    format!("${}", fixed(i128::from(nanousd), 1_000_000_000, 4))
}

/// A count with thousands separators (`302400` → `302,400`), for text people read.
pub(crate) fn grouped(value: u64) -> String {
    let digits = value.to_string();
    let mut out = String::with_capacity(digits.len() + digits.len() / 3);
    for (index, digit) in digits.chars().enumerate() {
        if index > 0 && (digits.len() - index) % 3 == 0 {
            out.push(',');
        }
        out.push(digit);
    }
    out
}

/// `numerator ÷ denominator` with three decimals (a ratio such as a cost multiplier).
pub(crate) fn ratio(numerator: u128, denominator: u128) -> String {
    fixed(numerator as i128, denominator, 3)
}

/// `numerator ÷ denominator` written with `decimals` digits after the point.
fn fixed(numerator: i128, denominator: u128, decimals: u32) -> String {
    if denominator == 0 {
        return format!("0.{:0width$}", 0, width = decimals as usize);
    }
    let scale = 10u128.pow(decimals);
    let magnitude = numerator.unsigned_abs() * scale;
    // Round half away from zero: add half the denominator before dividing.
    let units = (2 * magnitude + denominator) / (2 * denominator);
    let sign = if numerator < 0 && units > 0 { "-" } else { "" };
    format!("{sign}{}.{:0width$}", units / scale, units % scale, width = decimals as usize)
}

/// `1 − part ÷ whole` as a fraction: what sharing saved against the naive cost.
pub(crate) fn savings_fraction(cost: u64, naive: u64) -> String {
    fraction(i128::from(naive) - i128::from(cost), u128::from(naive))
}

/// `cause=count` pairs in cause order, `;`-separated; empty when nothing was missed.
pub(crate) fn misses(t: &forkcache_scenario::ScenarioTotals) -> String {
    let pairs: Vec<String> = t.misses.iter().map(|(cause, n)| format!("{}={n}", cause.name())).collect();
    pairs.join(";")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fixed_point_text() {
        assert_eq!(thousandths(31_140_000), "31140.000");
        assert_eq!(thousandths(5), "0.005");
        assert_eq!(fraction(1, 3), "0.3333");
        assert_eq!(fraction(2, 3), "0.6667");
        assert_eq!(fraction(1, 8), "0.1250");
        assert_eq!(fraction(1, 80_000), "0.0000");
        assert_eq!(fraction(-1, 8), "-0.1250");
        assert_eq!(fraction(5, 0), "0.0000");
        assert_eq!(ratio(79_875, 32_380), "2.467");
        assert_eq!(ratio(0, 0), "0.000");
        // The seed example's warm case: 1 − 31,140 / 302,400 = 271,260 / 302,400 = 0.89702…
        assert_eq!(savings_fraction(31_140, 302_400), "0.8970");
        // $0.075 is 75,000,000 nano-dollars.
        assert_eq!(usd(75_000_000), "0.075000000");
        assert_eq!(usd(1_234_567_890_123), "1234.567890123");
    }
}
