//! The built-in fixture suite (`fixtures/scenarios/`), compiled in so `demo` and the tests run
//! from anywhere.

/// One fixture file.
#[derive(Clone, Copy, Debug)]
pub struct Fixture {
    /// File stem.
    pub name: &'static str,
    /// The file's text.
    pub json: &'static str,
}

macro_rules! fixtures {
    ($($name:literal),* $(,)?) => {
        /// Every fixture, in demo order.
        pub const FIXTURES: &[Fixture] = &[
            $(Fixture { name: $name, json: include_str!(concat!("../../fixtures/scenarios/", $name, ".json")) }),*
        ];
    };
}

fixtures!["seed-warm", "seed-cold"];

/// An anti-pattern: its fixture beside the correct twin.
#[derive(Clone, Copy, Debug)]
pub struct Mistake {
    /// Short name.
    pub name: &'static str,
    /// What goes wrong.
    pub what: &'static str,
    /// The fixture with the mistake.
    pub mistake: &'static str,
    /// The fixture doing it right.
    pub correct: &'static str,
}

/// Every anti-pattern pair, in demo order.
pub const MISTAKES: &[Mistake] = &[];

/// The fixture named `name`.
pub fn fixture(name: &str) -> Option<&'static Fixture> {
    FIXTURES.iter().find(|f| f.name == name)
}
