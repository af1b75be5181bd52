// The account's repository signing key as stored: the secp256k1 private key as hex and the public
// key as a Multikey (its did:key without the prefix).
import type { Keypair, Secp256k1Keypair } from '@atproto/crypto'
import type { Store } from '../db/schema.js'
import { k256Keypair, newK256Scalar } from '../identity/k256.js'

export type SigningKeyRow = { private_key_hex: string; public_key_multibase: string }

/** the stored form of `keypair` (created exportable) */
export async function signingKeyRow(keypair: Secp256k1Keypair): Promise<SigningKeyRow> {
  return {
    private_key_hex: Buffer.from(await keypair.export()).toString('hex'),
    public_key_multibase: keypair.did().replace(/^did:key:/, ''),
  }
}

/** a fresh keypair and its stored form */
export async function newSigningKey(): Promise<{ keypair: Keypair; row: SigningKeyRow }> {
  const hex = newK256Scalar()
  const keypair = await k256Keypair(hex)
  return { keypair, row: { private_key_hex: hex, public_key_multibase: keypair.did().replace(/^did:key:/, '') } }
}

/** the did:key of the account's signing key; undefined when it has none */
export async function signingKeyDid(db: Store, did: string): Promise<string | undefined> {
  const key = await db.selectFrom('signing_key').select('public_key_multibase').where('did', '=', did).executeTakeFirst()
  return key && `did:key:${key.public_key_multibase}`
}
