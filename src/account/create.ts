// A fresh account: a repository signing key, a signed did:plc
// genesis operation stored at sequence 0 of the local log, the account row, a session and the empty
// signed repository, all in one transaction.
import { parseDidKey } from '@atproto/crypto'
import type { Keypair } from '@atproto/crypto'
import type { Config } from '../config.js'
import type { Db } from '../db/index.js'
import type { TokenKeys } from './session-tokens.js'
import type { OutboundGuard } from '../net/guard.js'
import { isUniqueViolation } from '../db/index.js'
import { xrpcError } from '../errors.js'
import { appendOp, didForGenesis, renderDidDoc, signOp, type UnsignedPlcOp } from '../identity/plc.js'
import { accountEvent, identityEvent } from '../sequencer/index.js'
import { mintPair } from './session-tokens.js'
import { hashPassword, MAX_PASSWORD_LENGTH } from './password.js'
import { checkEmail, validateHandle } from './handles.js'
import { storeRefreshRecord } from './store.js'
import { useInviteCode } from './invites.js'
import { creationRefusal } from './creation-policy.js'
import { newSigningKey } from './signing-keys.js'
import { createEmptyRepo } from '../repo/writer.js'
import { publishOp } from '../identity/directory.js'

export type FreshAccountInput = {
  handle: string
  email?: string
  password?: string
  inviteCode?: string
  recoveryKey?: string
}

/** what a new account's checks need */
export type NewAccountDeps = {
  config: Pick<Config, 'accountCreation' | 'handleDomains' | 'reservedHandles'>
  db: Db
  outbound?: OutboundGuard
}
type Deps = NewAccountDeps & { config: Pick<Config, 'plcUrl' | 'publicUrl'>; tokenKeys: TokenKeys; rotationKey: Keypair }

export async function createFreshAccount(deps: Deps, input: FreshAccountInput) {
  const { config, db } = deps
  const { handle, email, inviteCode, password } = await checkNewAccount(deps, input)
  if (input.recoveryKey) {
    try {
      parseDidKey(input.recoveryKey)
    } catch {
      throw xrpcError('InvalidRequest', 'recoveryKey must be a did:key')
    }
  }

  const { keypair: signingKey, row: signingKeyValues } = await newSigningKey()
  const genesis: UnsignedPlcOp = {
    type: 'plc_operation',
    rotationKeys: [...(input.recoveryKey ? [input.recoveryKey] : []), deps.rotationKey.did()],
    verificationMethods: { atproto: signingKey.did() },
    alsoKnownAs: [`at://${handle}`],
    services: { atproto_pds: { type: 'AtprotoPersonalDataServer', endpoint: config.publicUrl } },
    prev: null,
  }
  const signed = await signOp(genesis, deps.rotationKey)
  const did = didForGenesis(signed)
  const passwordHash = await hashPassword(password)
  const tokens = await mintPair(deps.tokenKeys, did)
  const now = new Date().toISOString()

  try {
    await db.transact(async (trx) => {
      // a code given is honoured (and spent) even where none is required, as the reference PDS does
      if (inviteCode) await useInviteCode(trx, inviteCode, did)
      await trx
        .insertInto('account')
        .values({
          did,
          handle,
          email,
          email_confirmed_at: null,
          password_hash: passwordHash,
          status: 'active',
          migration_state: 'none',
          created_at: now,
          status_changed_at: null,
          takedown_ref: null,
          invites_disabled: 0,
        })
        .execute()
      await trx
        .insertInto('signing_key')
        .values({ did, ...signingKeyValues })
        .execute()
      await appendOp(trx, did, 0, signed)
      await storeRefreshRecord(trx, { jti: tokens.refreshJti, did, expiresAt: tokens.refreshExpiresAt })
      await identityEvent(trx, did, handle)
      await accountEvent(trx, did, 'active')
      await createEmptyRepo(trx, did, signingKey)
      // last, so a refusal rolls everything back and nothing local outlives it
      if (config.plcUrl) await publishOp(config.plcUrl, did, signed)
    })
  } catch (err) {
    throw takenError(err)
  }
  return { did, handle, tokens, didDoc: renderDidDoc(did, genesis) }
}

/**
 * the input checks every new account passes, fresh or moving in: handle, email, password, the
 * server's account-creation mode (invite presence included), and a read of handle and email availability (the unique indexes settle races)
 */
export async function checkNewAccount(
  deps: NewAccountDeps,
  input: { handle: string; email?: string; password?: string; inviteCode?: string },
  did?: string,
) {
  const { config, db } = deps
  const handle = await validateHandle(deps, input.handle, did)
  if (!input.email) throw xrpcError('InvalidRequest', 'Email is required')
  const email = checkEmail(input.email)
  if (!input.password) throw xrpcError('InvalidPassword', 'Password is required')
  if (input.password.length > MAX_PASSWORD_LENGTH) {
    throw xrpcError('InvalidPassword', `Password may be at most ${MAX_PASSWORD_LENGTH} characters`)
  }
  const inviteCode = input.inviteCode?.trim()
  const refused = creationRefusal(config.accountCreation, did ? 'moving-in' : 'fresh', inviteCode)
  if (refused) throw refused
  const taken = await db
    .selectFrom('account')
    .select(['handle', 'email'])
    .where((eb) => eb.or([eb('handle', '=', handle), eb('email', '=', email)]))
    .where('status', '!=', 'deleted')
    .execute()
  if (taken.some((r) => r.handle === handle)) throw xrpcError('HandleNotAvailable', 'Handle already taken')
  if (taken.some((r) => r.email === email)) throw xrpcError('EmailNotAvailable', 'Email already taken')

  return { handle, email, inviteCode, password: input.password }
}

/** the unique indexes' verdict on an account insert, as the error a caller should see */
export function takenError(err: unknown): unknown {
  if (isUniqueViolation(err, 'account_handle_uq')) return xrpcError('HandleNotAvailable', 'Handle already taken')
  if (isUniqueViolation(err, 'account_email_uq')) return xrpcError('EmailNotAvailable', 'Email already taken')
  // the remaining unique key of an account row is its DID
  if (isUniqueViolation(err)) return xrpcError('AccountAlreadyExists', 'An account with this DID already exists')
  return err
}
