// com.atproto.identity.updateHandle: a handle on one of this server's domains, or any domain whose
// DNS record or well-known file names the account's DID, held by no other live account; a new PLC
// operation with the new alsoKnownAs (published to the directory in PDS_DID_PLC_URL mode) and an
// #identity event, all in one transaction.
import type { Server } from '../../../../generated/server/index.js'
import type { Services } from '../../../../context.js'
import type { AccessAuth } from '../../../../auth/verifier.js'
import { checkHandleFree, validateHandle } from '../../../../account/handles.js'
import { isUniqueViolation } from '../../../../db/index.js'
import { xrpcError } from '../../../../errors.js'
import { publishOp } from '../../../../identity/directory.js'
import { appendOp, latestOp, opCid, signOp } from '../../../../identity/plc.js'
import { identityEvent } from '../../../../sequencer/index.js'

export default (api: Server, { db, config, rotationKey, outbound }: Pick<Services, 'db' | 'config' | 'rotationKey' | 'outbound'>) =>
  api.com.atproto.identity.updateHandle<AccessAuth>(async ({ auth, input }) => {
    const { did } = auth.credentials
    const handle = await validateHandle({ config, outbound }, input.body.handle, did)
    await checkHandleFree(db, did, handle)
    try {
      await db.transaction().execute(async (trx) => {
        await trx.updateTable('account').set({ handle }).where('did', '=', did).execute()
        const latest = await latestOp(trx, did)
        if (!latest) throw xrpcError('InvalidRequest', 'No PLC operation log for this DID')
        if (!latest.op.rotationKeys.includes(rotationKey.did())) {
          throw xrpcError('InvalidRequest', "This server's rotation key may not sign operations for this DID")
        }
        const { sig: _sig, ...prevOp } = latest.op
        const aka = [`at://${handle}`, ...prevOp.alsoKnownAs.filter((a) => !a.startsWith('at://'))]
        const op = await signOp({ ...prevOp, alsoKnownAs: aka, prev: await opCid(latest.op) }, rotationKey)
        await appendOp(trx, did, latest.seq + 1, op)
        await identityEvent(trx, did, handle)
        if (config.plcUrl) await publishOp(config.plcUrl, did, op)
      })
    } catch (err) {
      if (isUniqueViolation(err, 'account_handle_uq')) throw xrpcError('HandleNotAvailable', 'Handle already taken')
      throw err
    }
  })
