// A change to a hosted did:plc identity made by this server: the next operation, signed with the
// server's rotation key, its #identity event, and (in directory mode) its publication, all inside
// the caller's transaction so a refused publication leaves nothing behind.
import type { Keypair } from '@atproto/crypto'
import { isUniqueViolation, type Db, type Tx } from '../db/index.js'
import { xrpcError } from '../errors.js'
import { identityEvent } from '../sequencer/index.js'
import { currentOp } from './control.js'
import { publishOp } from './directory.js'
import { appendOp, opCid, signOp, type UnsignedPlcOp } from './plc.js'

export type AmendDeps = { rotationKey: Keypair; plcUrl?: string }

export async function amendPlcOp(
  trx: Tx,
  did: string,
  { rotationKey, plcUrl }: AmendDeps,
  change: (prev: UnsignedPlcOp) => Partial<UnsignedPlcOp>,
  handle?: string,
) {
  const latest = await currentOp(trx, plcUrl, did)
  if (!latest) throw xrpcError('InvalidRequest', 'No PLC operation log for this DID')
  if (!latest.op.rotationKeys.includes(rotationKey.did())) {
    throw xrpcError(
      'InvalidRequest',
      `This server no longer holds a rotation key of ${did}, so it cannot change the DID document: make the change with your own rotation key`,
    )
  }
  const { sig: _sig, ...prevOp } = latest.op
  const op = await signOp({ ...prevOp, ...change(prevOp), prev: await opCid(latest.op) }, rotationKey)
  await appendOp(trx, did, latest.seq + 1, op)
  await identityEvent(trx, did, handle)
  if (plcUrl) await publishOp(plcUrl, did, op)
}

/**
 * a new handle: the account row and the DID's alsoKnownAs; a handle another account holds is
 * refused. When the DID document already names the handle (its owner published it with their own
 * rotation key), nothing is signed: the row changes and an #identity event tells the network.
 */
export async function setHandle(db: Db, did: string, handle: string, deps: AmendDeps) {
  try {
    await db.transact(async (trx) => {
      await trx.updateTable('account').set({ handle }).where('did', '=', did).execute()
      const current = await currentOp(trx, deps.plcUrl, did)
      if (current?.op.alsoKnownAs.find((a) => a.startsWith('at://')) === `at://${handle}`) {
        await identityEvent(trx, did, handle)
        return
      }
      if (current && !current.op.rotationKeys.includes(deps.rotationKey.did())) {
        throw xrpcError(
          'InvalidRequest',
          `This server no longer holds a rotation key of ${did}, so it cannot publish the handle: add at://${handle} to the DID document's alsoKnownAs with your own rotation key, then update the handle again`,
        )
      }
      const aka = (prev: UnsignedPlcOp) => [`at://${handle}`, ...prev.alsoKnownAs.filter((a) => !a.startsWith('at://'))]
      await amendPlcOp(trx, did, deps, (prev) => ({ alsoKnownAs: aka(prev) }), handle)
    })
  } catch (err) {
    if (isUniqueViolation(err, 'account_handle_uq')) throw xrpcError('HandleNotAvailable', 'Handle already taken')
    throw err
  }
}

/** names `signingKey` (a did:key) as the DID's atproto verification method */
export async function setSigningKey(db: Db, did: string, signingKey: string, handle: string, deps: AmendDeps) {
  await db.transact((trx) =>
    amendPlcOp(trx, did, deps, (prev) => ({ verificationMethods: { ...prev.verificationMethods, atproto: signingKey } }), handle),
  )
}
