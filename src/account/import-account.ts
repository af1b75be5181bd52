// Accounts that arrive with an existing DID: the reserved signing key and
// createAccount with `did` and a proof of control (a `plcOp` the DID's log holds or accepts, or a
// service-auth token from the DID's current key). The account starts deactivated and
// migrating-in, with no repository until importRepo.
import type { Config } from '../config.js'
import type { TokenKeys } from './session-tokens.js'
import type { OutboundGuard } from '../net/guard.js'
import type { Db } from '../db/index.js'
import { xrpcError } from '../errors.js'
import { appendOp, latestOp, opCid, renderDidDoc, type SignedPlcOp } from '../identity/plc.js'
import { publishOp } from '../identity/directory.js'
import { provePlcOp } from '../identity/did-control.js'
import { accountEvent, identityEvent } from '../sequencer/index.js'
import { mintPair } from './session-tokens.js'
import { hashPassword } from './password.js'
import { checkNewAccount, takenError, type NewAccountDeps } from './create.js'
import { storeRefreshRecord } from './store.js'
import type { Store } from '../db/schema.js'
import { useInviteCode } from './invites.js'
import { newSigningKey } from './signing-keys.js'

export const PLC_DID = /^did:plc:[a-z2-7]{24}$/

/** a new keypair for `did`, replacing any earlier reservation; returns the Multikey public key */
export async function reserveSigningKey(db: Db, did: string): Promise<string> {
  const values = { ...(await newSigningKey()).row, created_at: new Date().toISOString() }
  await db
    .insertInto('reserved_signing_key')
    .values({ did, ...values })
    .onConflict((oc) => oc.column('did').doUpdateSet(values))
    .execute()
  return values.public_key_multibase
}

export type MigratingAccountInput = {
  did: string
  plcOp: unknown
  handle: string
  email?: string
  password?: string
  inviteCode?: string
}

type Deps = NewAccountDeps & { config: Pick<Config, 'plcUrl' | 'publicUrl'>; tokenKeys: TokenKeys; outbound: OutboundGuard }

export async function createMigratingAccount(deps: Deps, input: MigratingAccountInput) {
  const { config, db } = deps
  // the structural checks first, each with its own message, then the proof of control
  if (!PLC_DID.test(input.did)) throw xrpcError('InvalidRequest', 'did must be a did:plc')
  const did = input.did
  if (await db.selectFrom('account').select('did').where('did', '=', did).executeTakeFirst()) {
    throw xrpcError('AccountAlreadyExists', 'An account with this DID already exists')
  }
  const reserved = await db.selectFrom('reserved_signing_key').selectAll().where('did', '=', did).executeTakeFirst()
  if (!reserved) throw xrpcError('MissingReservedKey', 'No signing key is reserved for this DID')
  const op = checkPlcOp(input.plcOp, {
    signingKey: `did:key:${reserved.public_key_multibase}`,
    endpoint: config.publicUrl,
    handle: input.handle.toLowerCase(),
  })
  // the operation must prove the caller controls the DID (its signature alone proves nothing)
  const proof = await provePlcOp(deps, did, op)

  const { handle, email, inviteCode } = await checkNewAccount(deps, input, did)
  const passwordHash = await hashPassword(input.password!)
  const tokens = await mintPair(deps.tokenKeys, did)
  try {
    await db.transact(async (trx) => {
      if (inviteCode) await useInviteCode(trx, inviteCode, did)
      await insertImported(trx, { did, handle, email, passwordHash })
      await trx
        .insertInto('signing_key')
        .values({ did, private_key_hex: reserved.private_key_hex, public_key_multibase: reserved.public_key_multibase })
        .execute()
      // conditional: of two concurrent creations with one reservation, one gets it
      const took = await trx
        .deleteFrom('reserved_signing_key')
        .where('did', '=', did)
        .where('private_key_hex', '=', reserved.private_key_hex)
        .executeTakeFirst()
      if (!Number(took.numDeletedRows)) throw xrpcError('MissingReservedKey', 'The reserved signing key changed meanwhile; reserve again')
      const local = await latestOp(trx, did)
      const cid = await opCid(op)
      if (!local || (await opCid(local.op)) !== cid) await appendOp(trx, did, local ? local.seq + 1 : 0, op)
      await storeRefreshRecord(trx, { jti: tokens.refreshJti, did, expiresAt: tokens.refreshExpiresAt })
      await identityEvent(trx, did, handle)
      await accountEvent(trx, did, 'deactivated')
      // last, so a refusal by the directory undoes the rest
      if (proof === 'signed' && config.plcUrl) await publishOp(config.plcUrl, did, op)
    })
  } catch (err) {
    throw takenError(err)
  }
  return { did, handle, tokens, didDoc: renderDidDoc(did, op) }
}

/**
 * The standard atproto migration: createAccount with `did` and a service-auth JWT the old server
 * minted for us (its `iss` must be that DID; the verifier checked the signature). The account
 * starts deactivated and migrating-in, with a signing key of this server (a reserved one if
 * reserveSigningKey was called, else a new one) that getRecommendedDidCredentials hands out; the
 * DID's operation log stays with the PLC directory until submitPlcOperation.
 */
export async function createServiceAuthAccount(deps: Deps, input: Omit<MigratingAccountInput, 'plcOp'>, issuer: string) {
  const { db } = deps
  if (!PLC_DID.test(input.did)) throw xrpcError('InvalidRequest', 'did must be a did:plc')
  const did = input.did
  if (issuer !== did) throw xrpcError('InvalidRequest', `The service auth token was issued by ${issuer}, not by ${did}`)
  if (await db.selectFrom('account').select('did').where('did', '=', did).executeTakeFirst()) {
    throw xrpcError('AccountAlreadyExists', 'An account with this DID already exists')
  }
  const { handle, email, inviteCode } = await checkNewAccount(deps, input, did)
  const reserved = await db.selectFrom('reserved_signing_key').selectAll().where('did', '=', did).executeTakeFirst()
  const key = reserved
    ? { private_key_hex: reserved.private_key_hex, public_key_multibase: reserved.public_key_multibase }
    : (await newSigningKey()).row
  const passwordHash = await hashPassword(input.password!)
  const tokens = await mintPair(deps.tokenKeys, did)
  try {
    await db.transact(async (trx) => {
      if (inviteCode) await useInviteCode(trx, inviteCode, did)
      await insertImported(trx, { did, handle, email, passwordHash })
      await trx
        .insertInto('signing_key')
        .values({ did, ...key })
        .execute()
      if (reserved) await trx.deleteFrom('reserved_signing_key').where('did', '=', did).execute()
      await storeRefreshRecord(trx, { jti: tokens.refreshJti, did, expiresAt: tokens.refreshExpiresAt })
      await identityEvent(trx, did, handle)
      await accountEvent(trx, did, 'deactivated')
    })
  } catch (err) {
    throw takenError(err)
  }
  return { did, handle, tokens, didDoc: undefined }
}

/** the account row of an account that moves in: deactivated, migrating-in, no repository yet */
export async function insertImported(trx: Store, a: { did: string; handle: string; email: string | null; passwordHash: string | null }) {
  await trx
    .insertInto('account')
    .values({
      did: a.did,
      handle: a.handle,
      email: a.email,
      email_confirmed_at: null,
      password_hash: a.passwordHash,
      status: 'deactivated',
      migration_state: 'migrating-in',
      created_at: new Date().toISOString(),
      status_changed_at: null,
      takedown_ref: null,
      invites_disabled: 0,
    })
    .execute()
}

/** the operation must name the reserved key, this server and the handle */
function checkPlcOp(raw: unknown, want: { signingKey: string; endpoint: string; handle: string }): SignedPlcOp {
  const bad = (why: string) => xrpcError('IncompatibleDidDoc', `plcOp: ${why}`)
  if (!raw || typeof raw !== 'object' || Array.isArray(raw)) throw bad('must be an object')
  const op = raw as Record<string, any>
  if (op.type !== 'plc_operation') throw bad('type must be plc_operation')
  if (typeof op.sig !== 'string' || !op.sig) throw bad('sig must be a non-empty string')
  if (typeof op.prev !== 'string' || !op.prev) throw bad('prev must name the previous operation')
  if (!Array.isArray(op.rotationKeys) || !op.rotationKeys.length || !op.rotationKeys.every((k: unknown) => typeof k === 'string')) {
    throw bad('rotationKeys must be a non-empty array of strings')
  }
  const vm = op.verificationMethods
  if (!vm || typeof vm !== 'object' || Array.isArray(vm) || !Object.values(vm).every((v) => typeof v === 'string')) {
    throw bad('verificationMethods must map names to did:key strings')
  }
  if (vm.atproto !== want.signingKey) {
    throw xrpcError('MismatchedSigningKey', "The operation's atproto key is not the key reserved on this server")
  }
  const svcs = op.services
  if (!svcs || typeof svcs !== 'object' || Array.isArray(svcs)) throw bad('services must be a map')
  const pds = svcs.atproto_pds
  if (!pds || typeof pds !== 'object' || typeof pds.endpoint !== 'string') throw bad('services.atproto_pds is missing')
  if (pds.endpoint.replace(/\/+$/, '') !== want.endpoint) {
    throw xrpcError('MismatchedServiceEndpoint', `The operation's atproto_pds endpoint is not ${want.endpoint}`)
  }
  if (pds.type !== 'AtprotoPersonalDataServer') throw bad('services.atproto_pds must have type AtprotoPersonalDataServer')
  if (!Array.isArray(op.alsoKnownAs) || !op.alsoKnownAs.every((a: unknown) => typeof a === 'string')) {
    throw bad('alsoKnownAs must be an array of strings')
  }
  if (String(op.alsoKnownAs[0]).toLowerCase() !== `at://${want.handle}`) throw bad(`alsoKnownAs[0] must be at://${want.handle}`)
  return {
    type: 'plc_operation',
    rotationKeys: op.rotationKeys,
    verificationMethods: vm,
    alsoKnownAs: op.alsoKnownAs,
    services: svcs,
    prev: op.prev,
    sig: op.sig,
  }
}
