//! `_pillar`: a minion asks for its pillar; the answer is encrypted for that minion alone.

use brine_protocol::crypt::{EncAlgo, PublicKey, SigAlgo};
use brine_protocol::payload::{dumps, get, map, Value};

use crate::master::Master;

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
        let grains = get(&load, "grains").cloned().unwrap_or(Value::Map(vec![]));
        let pillar = self.compile_pillar(id, &grains);
        self.cache.update(id, grains, pillar.clone());
        self.bus.fire(
            &format!("minion/refresh/{id}"),
            map(vec![("Minion data cache refresh", Value::from(id))]),
        );
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

    /// Pillar data for a minion. Brine has no pillar compiler yet: the master config's
    /// `pillar_data` map (if any) is given to every minion, else an empty map.
    fn compile_pillar(&self, _id: &str, _grains: &Value) -> Value {
        self.cfg
            .pillar_data
            .as_ref()
            .map(brine_protocol::payload::from_json)
            .filter(|v| matches!(v, Value::Map(_)))
            .unwrap_or(Value::Map(vec![]))
    }
}
