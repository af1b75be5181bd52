// A DID moving in is hosted only on proof that the caller controls it, and goes live only once its
// document sends it here: otherwise anyone could reserve a key for a stranger's DID and answer
// (and sign service tokens) as them.
import { verifySignature } from '@atproto/crypto'
import * as dagCbor from '@ipld/dag-cbor'
import type { Config } from '../config.js'
import type { Store } from '../db/schema.js'
import { xrpcError } from '../errors.js'
import { lastFromDirectory, plcData } from './directory.js'
import { latestOp, opCid, type SignedPlcOp } from './plc.js'

type Deps = { db: Store; config: Pick<Config, 'plcUrl' | 'publicUrl'> }

/**
 * How `op` proves control of `did`: it is already the DID's newest operation ('current'), or one
 * of the DID's current rotation keys signed it over that operation ('signed': this server must
 * submit it). The PLC directory is the authority when configured, else the local operation log.
 */
export async function provePlcOp({ db, config }: Deps, did: string, op: SignedPlcOp): Promise<'current' | 'signed'> {
  const unproven = (why: string) =>
    xrpcError(
      'InvalidRequest',
      `plcOp does not prove control of ${did}: ${why}; send the operation the PLC directory holds, one signed by a current rotation key over its newest operation, or a service auth token from the DID's current key`,
    )
  const head = config.plcUrl ? await lastFromDirectory(config.plcUrl, did) : (await latestOp(db, did))?.op
  if (!head) {
    throw unproven(config.plcUrl ? 'the PLC directory does not know the DID' : 'this server has no PLC directory to check it against')
  }
  const headCid = await opCid(head)
  if ((await opCid(op)) === headCid) return 'current'
  if (op.prev !== headCid) throw unproven("it is not the DID's newest operation, nor built on it")
  const { sig, ...unsigned } = op
  const sigBytes = Buffer.from(sig, 'base64url')
  const data = dagCbor.encode(unsigned)
  for (const key of head.rotationKeys) {
    if (await verifySignature(key, data, sigBytes).catch(() => false)) return 'signed'
  }
  throw unproven("its signature is not from one of the DID's rotation keys")
}

/**
 * Refuses (InvalidRequest, saying what is missing) unless the DID's current document, read fresh
 * rather than from any cache, names this server's endpoint and the account's signing key.
 */
export async function checkDocNamesUs({ db, config }: Deps, did: string): Promise<void> {
  const key = await db.selectFrom('signing_key').select('public_key_multibase').where('did', '=', did).executeTakeFirst()
  const data: { services?: Record<string, any>; verificationMethods?: Record<string, unknown> } | undefined = config.plcUrl
    ? await plcData(config.plcUrl, did)
    : (await latestOp(db, did))?.op
  if (!data) throw xrpcError('InvalidRequest', `The DID document of ${did} cannot be resolved`)
  const missing: string[] = []
  const endpoint = data.services?.atproto_pds?.endpoint
  if (typeof endpoint !== 'string' || endpoint.replace(/\/+$/, '') !== config.publicUrl) {
    missing.push(`its #atproto_pds service endpoint is not ${config.publicUrl}`)
  }
  if (!key || data.verificationMethods?.atproto !== `did:key:${key.public_key_multibase}`) {
    missing.push("its #atproto verification method is not this account's signing key here")
  }
  if (missing.length) {
    throw xrpcError(
      'InvalidRequest',
      `The DID document of ${did} does not name this server yet: ${missing.join('; ')}. Update the DID first.`,
    )
  }
}
