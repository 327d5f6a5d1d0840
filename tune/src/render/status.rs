//! (filled by the move of the engine's terminal text; see mod.rs)
