//! The arrays of objects a round hands scripts (a check's `resources`, a `ctx` list): each
//! distinct list of objects is built once as a template of root proxies, kept from check
//! to check and from round to round while its objects stay the same, and every evaluation
//! gets a fresh copy of it (a script may change its own array; the copy is a block copy
//! of the references, not a walk over the objects).

use std::cell::{Cell, RefCell};

use mlua::Table;

use super::super::convert::NodeId;

/// The templates kept, by the root node ids they list, in order.
#[derive(Debug, Default)]
pub(super) struct Arrays {
    kept: RefCell<Vec<Kept>>,
}

#[derive(Debug)]
struct Kept {
    roots: Vec<NodeId>,
    template: Table,
    /// Read since the current round began.
    used: Cell<bool>,
}

impl Arrays {
    /// The template listing `roots`, made by `make` when none is kept.
    pub(super) fn template(
        &self,
        roots: Vec<NodeId>,
        make: impl FnOnce(&[NodeId]) -> mlua::Result<Table>,
    ) -> mlua::Result<Table> {
        if let Some(kept) = self.kept.borrow().iter().find(|k| k.roots == roots) {
            kept.used.set(true);
            return Ok(kept.template.clone());
        }
        let template = make(&roots)?;
        self.kept.borrow_mut().push(Kept {
            roots,
            template: template.clone(),
            used: Cell::new(true),
        });
        Ok(template)
    }

    /// A new round begins: the templates the last round did not read are dropped.
    pub(super) fn next_round(&self) {
        let mut kept = self.kept.borrow_mut();
        kept.retain(|k| k.used.get());
        for k in kept.iter() {
            k.used.set(false);
        }
    }

    /// Drops every template (some list objects the state let go of).
    pub(super) fn clear(&self) {
        self.kept.borrow_mut().clear();
    }
}
