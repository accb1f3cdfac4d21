//! Rebuilds the crate when a migration under `schema/` is added or changed: `sqlx::migrate!`
//! embeds them at compile time, and cargo does not otherwise know to look there.

fn main() {
    println!("cargo:rerun-if-changed=../schema");
}
