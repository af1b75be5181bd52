// A did:plc identity the test controls, registered in a test PLC directory: its rotation key and
// the signing key of its "old server", as an account elsewhere would have before it moves here.
import { Secp256k1Keypair } from '@atproto/crypto'
import { expect } from 'vitest'
import { didForGenesis, signOp } from '../src/identity/plc.js'

export async function createPlcIdentity(plcUrl: string, handle: string) {
  const rotation = await Secp256k1Keypair.create()
  const atproto = await Secp256k1Keypair.create()
  const genesis = await signOp(
    {
      type: 'plc_operation',
      rotationKeys: [rotation.did()],
      verificationMethods: { atproto: atproto.did() },
      alsoKnownAs: [`at://${handle}`],
      services: { atproto_pds: { type: 'AtprotoPersonalDataServer', endpoint: 'https://old.example.com' } },
      prev: null,
    },
    rotation,
  )
  const did = didForGenesis(genesis)
  const res = await fetch(`${plcUrl}/${did}`, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify(genesis),
  })
  expect(res.status).toBe(200)
  return { did, rotation, atproto, head: genesis }
}
