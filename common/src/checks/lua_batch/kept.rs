//! A batch as the agent runs it round after round: on the Lua state the previous round of
//! its kind kept ([`Batch::evaluate_kept`]), so an object version is parsed and converted
//! once, however many rounds read it.

use super::{Batch, CheckRun};
use crate::compact::CompactObject;
use crate::lua::{LuaLimits, LuaRound};

impl Batch {
    /// [`Batch::evaluate_compact_in`] on `state`, the state kept from the previous round
    /// of this kind of round (a new one is made and left there when it is `None`), for
    /// the next round to run on. When no state can be made, every check fails saying why
    /// and `state` stays `None`.
    pub fn evaluate_kept(
        &self,
        state: &mut Option<LuaRound>,
        listed: Vec<Result<Vec<CompactObject>, String>>,
        limits: LuaLimits,
        mut each: impl FnMut(usize, &CheckRun),
    ) -> Vec<CheckRun> {
        let round = match state {
            Some(round) => round,
            None => match LuaRound::new(limits) {
                Ok(round) => state.insert(round),
                Err(e) => return self.all_failed(&e, &mut each),
            },
        };
        self.round_in(round, listed, limits, each)
    }
}
