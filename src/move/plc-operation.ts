// signPlcOperation: consume the email token, overlay the given fields on the latest operation, sign
// with the server's rotation key, store at seq + 1, publish upstream, follow the handle, emit
// `#identity`, all in one transaction (publishing last, so a refusal undoes it all, the token
// included). Except an operation moving the account to another server without a prior
// requestAccountMigrate (standard atproto migration): signed and returned only, for the destination
// to submit.
import { parseDidKey } from '@atproto/crypto'
import type { Keypair } from '@atproto/crypto'
import type { Config } from '../config.js'
import type { Db } from '../db/index.js'
import type { Logger } from '../logger.js'
import type { OutboundGuard } from '../net/guard.js'
import type { AccountRow } from '../account/store.js'
import { consumeEmailToken } from '../account/email-tokens.js'
import { isUniqueViolation } from '../db/index.js'
import { xrpcError } from '../errors.js'
import { currentOp } from '../identity/control.js'
import { lastFromDirectory, publishOp } from '../identity/directory.js'
import { appendOp, latestOp, opCid, signOp, type PlcService, type SignedPlcOp, type UnsignedPlcOp } from '../identity/plc.js'
import { identityEvent } from '../sequencer/index.js'
import { checkHandleFree, validateHandle } from '../account/handles.js'
import { normalizeHandle, onServiceDomain, resolveExternalHandle } from '../identity/handle-resolver.js'
import { isValidHandle } from '@atproto/syntax'

export type OpFields = {
  rotationKeys?: string[]
  alsoKnownAs?: string[]
  verificationMethods?: unknown
  services?: unknown
}

type Deps = {
  db: Db
  config: Pick<Config, 'handleDomains' | 'reservedHandles' | 'plcUrl' | 'publicUrl'>
  rotationKey: Keypair
  logger: Logger
  outbound: OutboundGuard
}

export async function signPlcOperation(deps: Deps, account: AccountRow, input: OpFields & { token?: string }): Promise<SignedPlcOp> {
  const { db, config, rotationKey, logger } = deps
  if (!input.token) throw xrpcError('InvalidRequest', 'token is required')
  const fields = checkFields(input)
  const did = account.did
  const wanted = requestedHandle(fields, account)
  // looked up before the transaction, so no lock waits on the network
  const resolved =
    wanted && !onServiceDomain(wanted, config.handleDomains)
      ? await resolveExternalHandle(deps.outbound, wanted, { fresh: true })
      : undefined
  try {
    return await db.transact(async (trx) => {
      if (!(await consumeEmailToken(trx, did, 'plc-operation-signature', input.token!))) {
        throw xrpcError('InvalidToken', 'Token is invalid or expired')
      }
      // built on the directory's newest operation: its owner may have changed the DID there with their own key
      const latest = await currentOp(trx, config.plcUrl, did)
      if (!latest) throw xrpcError('InvalidRequest', 'No PLC operation log for this DID')
      if (!latest.op.rotationKeys.includes(rotationKey.did())) {
        throw xrpcError(
          'InvalidRequest',
          `This server no longer holds a rotation key of ${did}, so it cannot sign operations for it: sign them with your own rotation key`,
        )
      }
      const { sig: _sig, ...prevOp } = latest.op
      const unsigned: UnsignedPlcOp = {
        type: 'plc_operation',
        rotationKeys: fields.rotationKeys ?? prevOp.rotationKeys,
        verificationMethods: fields.verificationMethods ?? prevOp.verificationMethods,
        // a handle given here is signed in lower case, the form it is compared in everywhere
        alsoKnownAs: fields.alsoKnownAs?.map((a, i) => (i === 0 && a.startsWith('at://') ? a.toLowerCase() : a)) ?? prevOp.alsoKnownAs,
        services: fields.services ?? prevOp.services,
        prev: await opCid(latest.op),
      }
      const handOff = isStandardHandOff(account, unsigned, config.publicUrl)
      let handle: string | undefined
      if (!handOff && fields.alsoKnownAs && JSON.stringify(fields.alsoKnownAs) !== JSON.stringify(prevOp.alsoKnownAs)) {
        if (wanted) {
          // the handle follows the operation here, so it obeys updateHandle's rules (a refusal
          // rolls back, the token included)
          handle = await validateHandle({ config, outbound: deps.outbound }, wanted, did, resolved)
          await checkHandleFree(trx, did, handle)
        }
      }
      if (!unsigned.rotationKeys.includes(rotationKey.did())) {
        // accepted: the user may drop this server's key, after which only their own keys change the DID
        logger.warn({ did }, "signPlcOperation: the operation removes this server's rotation key")
      }
      const op = await signOp(unsigned, rotationKey)
      if (handOff) {
        // the standard atproto migration: the destination submits this operation
        // (submitPlcOperation), and a PLC directory refuses it a second time; so, like the
        // reference PDS, it is only signed and returned, the token consumed. Nothing changes here
        // until the directory has it.
        logger.info({ did }, 'signPlcOperation: operation for another server signed, left for it to submit')
        return op
      }
      await appendOp(trx, did, latest.seq + 1, op)
      if (handle) await trx.updateTable('account').set({ handle }).where('did', '=', did).execute()
      await identityEvent(trx, did, handle ?? account.handle)
      if (config.plcUrl) await publishOp(config.plcUrl, did, op)
      return op
    })
  } catch (err) {
    if (isUniqueViolation(err, 'account_handle_uq')) throw xrpcError('HandleNotAvailable', 'Handle already taken')
    throw err
  }
}

/** the handle the operation's first `at://` entry names, when it differs from the account's */
function requestedHandle(fields: ReturnType<typeof checkFields>, account: AccountRow): string | undefined {
  const first = fields.alsoKnownAs?.[0]
  if (!first?.startsWith('at://')) return undefined
  const handle = normalizeHandle(first.slice('at://'.length))
  return handle !== account.handle ? handle : undefined
}

/**
 * An operation handing the account to another server's endpoint with no requestAccountMigrate
 * before it: the standard atproto migration, whose destination submits it.
 */
function isStandardHandOff(account: AccountRow, op: UnsignedPlcOp, publicUrl: string): boolean {
  if (account.migration_state === 'migrating-out') return false
  const endpoint = op.services?.atproto_pds?.endpoint
  return typeof endpoint === 'string' && endpoint.replace(/\/+$/, '') !== publicUrl
}

function checkFields(input: OpFields) {
  const out: Partial<Pick<UnsignedPlcOp, 'rotationKeys' | 'alsoKnownAs' | 'verificationMethods' | 'services'>> = {}
  if (input.rotationKeys !== undefined) {
    if (!input.rotationKeys.length) throw xrpcError('InvalidRequest', 'rotationKeys may not be empty')
    for (const k of input.rotationKeys) didKey(k, 'rotationKeys')
    out.rotationKeys = input.rotationKeys
  }
  if (input.alsoKnownAs !== undefined) {
    const first = input.alsoKnownAs[0]
    if (first !== undefined && first.startsWith('at://') && !isValidHandle(first.slice(5))) {
      throw xrpcError('InvalidRequest', `alsoKnownAs[0] is not an at:// handle: ${first}`)
    }
    out.alsoKnownAs = input.alsoKnownAs
  }
  if (input.verificationMethods !== undefined) {
    const vm = input.verificationMethods
    if (!isPlainObject(vm)) throw xrpcError('InvalidRequest', 'verificationMethods must map names to did:key strings')
    for (const v of Object.values(vm)) didKey(v, 'verificationMethods')
    out.verificationMethods = vm as Record<string, string>
  }
  if (input.services !== undefined) {
    const svcs = input.services
    if (!isPlainObject(svcs)) throw xrpcError('InvalidRequest', 'services must map names to {type, endpoint}')
    for (const s of Object.values(svcs)) {
      if (!isPlainObject(s) || typeof s.type !== 'string' || typeof s.endpoint !== 'string') {
        throw xrpcError('InvalidRequest', 'each service must be {type, endpoint}')
      }
    }
    out.services = Object.fromEntries(
      Object.entries(svcs as Record<string, PlcService>).map(([k, s]) => [k, { type: s.type, endpoint: s.endpoint }]),
    )
  }
  return out
}

function didKey(v: unknown, field: string) {
  try {
    if (typeof v !== 'string') throw new Error()
    parseDidKey(v)
  } catch {
    throw xrpcError('InvalidRequest', `${field} must hold did:key strings`)
  }
}

const isPlainObject = (v: unknown): v is Record<string, any> => !!v && typeof v === 'object' && !Array.isArray(v)

/**
 * submitPlcOperation (standard atproto migration): an operation the old server signed with its
 * rotation key must name this server's rotation key, the account's signing key here, this
 * server's endpoint and the account's handle; it is stored as the newest operation of the local
 * log, announced with `#identity` and published to the PLC directory (which checks its signature
 * against the DID's log), all in one transaction, so a refusal leaves nothing behind.
 */
export async function submitPlcOperation(deps: Omit<Deps, 'outbound'>, account: AccountRow, raw: unknown): Promise<void> {
  const { db, config, rotationKey } = deps
  if (!config.plcUrl) {
    throw xrpcError('InvalidRequest', 'This server has no PLC directory (PDS_DID_PLC_URL) to submit the operation to')
  }
  const did = account.did
  if (!isPlainObject(raw)) throw xrpcError('InvalidRequest', 'operation must be an object')
  const op = raw
  if (op.type !== 'plc_operation') throw xrpcError('InvalidRequest', 'operation type must be plc_operation')
  if (typeof op.sig !== 'string' || !op.sig || typeof op.prev !== 'string' || !op.prev) {
    throw xrpcError('InvalidRequest', 'operation must be signed and name its prev')
  }
  const fields = checkFields(op)
  if (!fields.rotationKeys || !fields.verificationMethods || !fields.services || !fields.alsoKnownAs) {
    throw xrpcError('InvalidRequest', 'operation must have rotationKeys, verificationMethods, alsoKnownAs and services')
  }
  if (!fields.rotationKeys.includes(rotationKey.did())) {
    throw xrpcError('InvalidRequest', "The operation's rotation keys do not include this server's rotation key")
  }
  const key = await db.selectFrom('signing_key').select('public_key_multibase').where('did', '=', did).executeTakeFirst()
  if (!key || fields.verificationMethods.atproto !== `did:key:${key.public_key_multibase}`) {
    throw xrpcError('InvalidRequest', "The operation's atproto key is not this account's signing key on this server")
  }
  const pds = fields.services.atproto_pds
  if (!pds || pds.type !== 'AtprotoPersonalDataServer' || pds.endpoint.replace(/\/+$/, '') !== config.publicUrl) {
    throw xrpcError('InvalidRequest', `The operation's atproto_pds service is not ${config.publicUrl}`)
  }
  if (!fields.alsoKnownAs.map((a) => a.toLowerCase()).includes(`at://${account.handle}`)) {
    throw xrpcError('InvalidRequest', `The operation's alsoKnownAs does not include at://${account.handle}`)
  }
  const signed: SignedPlcOp = {
    type: 'plc_operation',
    rotationKeys: fields.rotationKeys,
    verificationMethods: fields.verificationMethods,
    alsoKnownAs: fields.alsoKnownAs,
    services: fields.services,
    prev: op.prev,
    sig: op.sig,
  }
  await db.transact(async (trx) => {
    const latest = await latestOp(trx, did)
    await appendOp(trx, did, latest ? latest.seq + 1 : 0, signed)
    await identityEvent(trx, did, account.handle)
    // an origin that publishes what it signs (ours does) got there first: the
    // directory's newest operation is this one, and a second submission would be refused
    const last = await lastFromDirectory(config.plcUrl!, did)
    if (!last || (await opCid(last)) !== (await opCid(signed))) await publishOp(config.plcUrl!, did, signed)
  })
}
