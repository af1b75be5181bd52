// did:plc operations: building, signing, deriving the DID, and the per-DID operation log. The DID
// document is always rendered from the latest stored operation.
import { createHash } from 'node:crypto'
import * as dagCbor from '@ipld/dag-cbor'
import { CID } from 'multiformats/cid'
import { sha256 } from 'multiformats/hashes/sha2'
import { base32 } from 'multiformats/bases/base32'
import type { Keypair } from '@atproto/crypto'
import type { Store } from '../db/schema.js'

export type PlcService = { type: string; endpoint: string }
export type UnsignedPlcOp = {
  type: 'plc_operation'
  rotationKeys: string[]
  verificationMethods: Record<string, string>
  alsoKnownAs: string[]
  services: Record<string, PlcService>
  prev: string | null
}
export type SignedPlcOp = UnsignedPlcOp & { sig: string }

export async function signOp(op: UnsignedPlcOp, rotationKey: Keypair): Promise<SignedPlcOp> {
  const sig = await rotationKey.sign(dagCbor.encode(op))
  return { ...op, sig: Buffer.from(sig).toString('base64url') }
}

/** the DID a genesis operation creates: base32 of sha256 of the signed op's DAG-CBOR, 24 chars */
export function didForGenesis(op: SignedPlcOp): string {
  const hash = createHash('sha256').update(dagCbor.encode(op)).digest()
  return 'did:plc:' + base32.baseEncode(hash).slice(0, 24)
}

/** CID of an operation, as `prev` of the next one names it */
export async function opCid(op: SignedPlcOp): Promise<string> {
  const bytes = dagCbor.encode(op)
  return CID.createV1(dagCbor.code, await sha256.digest(bytes)).toString()
}

export async function appendOp(db: Store, did: string, seq: number, op: SignedPlcOp) {
  await db
    .insertInto('plc_operation')
    .values({ did, seq, cid: await opCid(op), operation: JSON.stringify(op), created_at: new Date().toISOString() })
    .execute()
}

export async function latestOp(db: Store, did: string): Promise<{ seq: number; op: SignedPlcOp } | undefined> {
  const row = await db
    .selectFrom('plc_operation')
    .select(['seq', 'operation'])
    .where('did', '=', did)
    .orderBy('seq', 'desc')
    .limit(1)
    .executeTakeFirst()
  return row && { seq: row.seq, op: JSON.parse(row.operation) }
}

/** every operation of `did` in the local log, oldest first */
export async function opLog(db: Store, did: string) {
  return db.selectFrom('plc_operation').select(['cid', 'operation', 'created_at']).where('did', '=', did).orderBy('seq', 'asc').execute()
}

export type DidDocument = {
  '@context': string[]
  id: string
  alsoKnownAs: string[]
  verificationMethod: { id: string; type: string; controller: string; publicKeyMultibase: string }[]
  service: { id: string; type: string; serviceEndpoint: string }[]
}

export function renderDidDoc(did: string, op: UnsignedPlcOp): DidDocument {
  const atprotoKey = op.verificationMethods.atproto
  return {
    '@context': [
      'https://www.w3.org/ns/did/v1',
      'https://w3id.org/security/multikey/v1',
      'https://w3id.org/security/suites/secp256k1-2019/v1',
    ],
    id: did,
    alsoKnownAs: op.alsoKnownAs,
    verificationMethod: atprotoKey
      ? [
          {
            id: `${did}#atproto`,
            type: 'Multikey',
            controller: did,
            publicKeyMultibase: atprotoKey.replace(/^did:key:/, ''),
          },
        ]
      : [],
    service: Object.entries(op.services).map(([name, s]) => ({
      id: `#${name}`,
      type: s.type,
      serviceEndpoint: s.endpoint,
    })),
  }
}

/** the `atproto_pds` endpoint a DID document names, if any */
export function pdsEndpoint(doc: DidDocument): string | undefined {
  return doc.service.find((s) => s.id === '#atproto_pds' || s.id.endsWith('#atproto_pds'))?.serviceEndpoint
}

/** the account's DID document, rendered from its latest PLC operation */
export async function didDocFor(db: Store, did: string): Promise<DidDocument | undefined> {
  const latest = await latestOp(db, did)
  return latest && renderDidDoc(did, latest.op)
}
