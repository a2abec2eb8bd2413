//! `_pillar`: a minion asks for its pillar; the answer is encrypted for that minion alone.

use brine_protocol::crypt::{EncAlgo, PublicKey, SigAlgo};
use brine_protocol::loads::PillarLoad;
use brine_protocol::payload::{dumps, map, set, Value};

use crate::master::Master;
use crate::pillar::PillarRequest;

impl Master {
    pub(crate) fn on_pillar(
        &self,
        id: &str,
        load: Value,
        nonce: Option<&str>,
        minion_pub: &PublicKey,
        enc_algo: EncAlgo,
        sig_algo: SigAlgo,
    ) -> Vec<u8> {
        let pillar = match PillarLoad::parse(load) {
            Ok(req) => {
                let mut grains = req.grains;
                set(&mut grains, "id", Value::from(id));
                let request = PillarRequest {
                    id: id.to_string(),
                    grains: grains.clone(),
                    saltenv: req.saltenv,
                    pillarenv: req.pillarenv,
                    pillar_override: req.pillar_override.to_value(),
                    clean_cache: req.clean_cache,
                };
                let pillar = self.pillars.compile(&request);
                self.cache.update(id, grains, pillar.clone());
                self.bus.fire(
                    &format!("minion/refresh/{id}"),
                    map(vec![("Minion data cache refresh", Value::from(id))]),
                );
                pillar
            }
            Err(e) => {
                // Salt answers a load without grains with False.
                tracing::warn!("_pillar request from {id}: {e}");
                Value::Boolean(false)
            }
        };
        let Some(nonce) = nonce else {
            return dumps(&map(vec![(
                "error",
                Value::from("Nonce not included in request"),
            )]));
        };
        let key_string = brine_protocol::crypt::Crypticle::generate_key_string();
        let (Ok(key_enc), Ok(crypticle)) = (
            minion_pub.encrypt(key_string.as_bytes(), enc_algo),
            brine_protocol::crypt::Crypticle::new(&key_string),
        ) else {
            return dumps(&map(vec![("error", Value::from("AES key not found"))]));
        };
        let data = dumps(&map(vec![
            ("key", Value::Binary(key_enc.clone())),
            ("pillar", pillar),
            ("nonce", Value::from(nonce)),
        ]));
        let sig = self.secrets.master_key.sign(&data, sig_algo);
        let blob = crypticle.dumps(
            &map(vec![
                ("data", Value::Binary(data)),
                ("sig", Value::Binary(sig)),
            ]),
            None,
        );
        dumps(&map(vec![
            ("key", Value::Binary(key_enc)),
            ("pillar", Value::Binary(blob)),
        ]))
    }
}
