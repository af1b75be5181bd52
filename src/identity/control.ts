// Who controls a hosted did:plc: people may add a rotation key of their own above this server's,
// or remove this server's, directly at the PLC directory. This server then builds on the
// directory's newest operation (never on its own older copy, which the directory would refuse, or
// worse, accept as a fork undoing the person's change), and tells whether it may still sign.
import { Secp256k1Keypair } from '@atproto/crypto'
import type { Config } from '../config.js'
import { isUniqueViolation } from '../db/index.js'
import type { Store } from '../db/schema.js'
import { lastFromDirectory } from './directory.js'
import { appendOp, latestOp, opCid, type SignedPlcOp } from './plc.js'

/**
 * The DID's newest operation: the directory's in directory mode (appended to the local log when
 * someone changed the DID there, so documents served from here follow), else the local log's.
 */
export async function currentOp(db: Store, plcUrl: string | undefined, did: string): Promise<{ seq: number; op: SignedPlcOp } | undefined> {
  const local = await latestOp(db, did)
  if (!plcUrl) return local
  const head = await lastFromDirectory(plcUrl, did)
  if (!head) return local
  if (local && (await opCid(local.op)) === (await opCid(head))) return local
  const seq = (local?.seq ?? -1) + 1
  try {
    await appendOp(db, did, seq, head)
  } catch (err) {
    // another request recorded it first
    if (!isUniqueViolation(err)) throw err
  }
  return { seq, op: head }
}

export type Control = {
  /** this server's rotation key is among the DID's: it can sign operations */
  canSign: boolean
  /** rotation keys ranked above this server's (all of them when it has none) */
  keysAbove: number
}

export function controlOf(op: Pick<SignedPlcOp, 'rotationKeys'>, serverKeyDid: string): Control {
  const at = op.rotationKeys.indexOf(serverKeyDid)
  return { canSign: at >= 0, keysAbove: at >= 0 ? at : op.rotationKeys.length }
}

/** the did:key of the configured rotation key */
export async function serverRotationKeyDid(config: Pick<Config, 'secrets'>): Promise<string> {
  return (await Secp256k1Keypair.import(config.secrets.plcRotationKey)).did()
}

/**
 * Hosted did:plc accounts (deleted ones aside, oldest first, at most `limit`) whose newest
 * operation no longer lists this server's rotation key, as the directory (or the local log) says.
 */
export async function accountsOutOfControl(db: Store, config: Pick<Config, 'plcUrl' | 'secrets'>, limit: number) {
  const serverKey = await serverRotationKeyDid(config)
  const accounts = await db
    .selectFrom('account')
    .select(['did', 'handle'])
    .where('status', '!=', 'deleted')
    .where('did', 'like', 'did:plc:%')
    .orderBy('created_at')
    .limit(limit + 1)
    .execute()
  const lost: { did: string; handle: string | null }[] = []
  for (const a of accounts.slice(0, limit)) {
    const current = await currentOp(db, config.plcUrl, a.did)
    if (current && !controlOf(current.op, serverKey).canSign) lost.push(a)
  }
  return { checked: Math.min(accounts.length, limit), more: accounts.length > limit, lost }
}

/** whether this server may still sign operations for `did`; undefined when that cannot be told now */
export async function serverSignsFor(
  db: Store,
  plcUrl: string | undefined,
  serverKeyDid: string,
  did: string,
): Promise<boolean | undefined> {
  if (!did.startsWith('did:plc:')) return undefined
  try {
    const current = await currentOp(db, plcUrl, did)
    return current ? controlOf(current.op, serverKeyDid).canSign : undefined
  } catch {
    return undefined
  }
}
