//! Verifying many signatures at once (ed25519-dalek's `verify_batch`), about twice as fast
//! per signature as one `verify_strict` each from eight signatures on.
//!
//! # What batching changes
//!
//! A batch checks one random linear combination of the signatures' equations. It refuses
//! everything [`super::Unverified::verify`] refuses *from anyone but the key's holder*:
//! - weak (small-order) public keys never reach a batch: [`Item`] takes a [`StrongKey`],
//!   which was checked when it was made (a weak key would let anyone sign anything);
//! - a non-canonical `S` fails the batch (dalek checks it as for a single signature);
//! - a signature that does not verify at all fails the batch except with probability
//!   2^-128 (the combination's coefficients are 128-bit and derived from every input).
//!
//! What a batch can accept that `verify_strict` refuses: a signature whose `R` carries a
//! small-order (torsion) component, or is a non-canonical encoding, may pass with
//! probability 1/8 or more. Producing one needs the private key: `R`'s hash binds the
//! message, so nobody else can turn a valid signature into such a variant. The key holder
//! gains nothing by it (it can sign any report properly), and replay protection does not
//! rest on signatures being unique (it is the signed `(incarnation, seq)`). So the only
//! property given up is strong unforgeability against the key holder itself; nothing an
//! outsider could use. It is still a difference, so the hub lets an operator turn
//! batching off (`fleetpulse-hub serve --batch-verify=false`; it is on by default).
//!
//! When a batch fails, every signature in it is verified again with `verify_strict`, so a
//! refusal is always a strict refusal, and one bad signature cannot make good ones fail.

use ed25519_dalek::{Signature, VerifyingKey};

use crate::protocol::keys::StrongKey;

/// One signature to check: the signed bytes, the signature and the public key.
#[derive(Clone, Copy, Debug)]
pub struct Item<'a> {
    /// The JWS signing input (`BASE64URL(header) "." BASE64URL(payload)`).
    pub message: &'a [u8],
    /// The signature.
    pub signature: &'a Signature,
    /// The key it must verify with.
    pub key: &'a StrongKey,
}

/// Verifies `items`, returning one verdict per item, in order: with one batch when there
/// are two or more (see the module docs for what that changes), else with `verify_strict`.
pub fn verify_many(items: &[Item<'_>]) -> Vec<bool> {
    let strict = |i: &Item<'_>| i.key.verify_strict(i.message, i.signature).is_ok();
    if items.len() < 2 {
        return items.iter().map(strict).collect();
    }
    let messages: Vec<&[u8]> = items.iter().map(|i| i.message).collect();
    let signatures: Vec<Signature> = items.iter().map(|i| *i.signature).collect();
    let keys: Vec<VerifyingKey> = items.iter().map(|i| **i.key).collect();
    let batch_ok = ed25519_dalek::verify_batch(&messages, &signatures, &keys).is_ok();
    items.iter().map(|i| batch_ok || strict(i)).collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::protocol::keys;
    use ed25519_dalek::Signer;

    fn signed(n: usize) -> Vec<(Vec<u8>, Signature, StrongKey)> {
        (0..n)
            .map(|i| {
                let key = keys::generate();
                let message = format!("e30.report-{i}").into_bytes();
                let signature = key.sign(&message);
                (message, signature, StrongKey::of(&key))
            })
            .collect()
    }

    fn items(s: &[(Vec<u8>, Signature, StrongKey)]) -> Vec<Item<'_>> {
        s.iter()
            .map(|(message, signature, key)| Item {
                message,
                signature,
                key,
            })
            .collect()
    }

    #[test]
    fn a_batch_of_valid_signatures_is_accepted() {
        for n in [0, 1, 2, 16] {
            let s = signed(n);
            assert_eq!(verify_many(&items(&s)), vec![true; n]);
        }
    }

    #[test]
    fn one_bad_signature_is_refused_and_the_others_still_pass() {
        let mut s = signed(8);
        s[3].0.push(b'x');
        let verdicts = verify_many(&items(&s));
        assert_eq!(verdicts.iter().filter(|v| !**v).count(), 1);
        assert!(!verdicts[3]);
    }
}
