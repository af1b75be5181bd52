// com.atproto.admin.updateSubjectStatus: takedown (→ takendown) and its reversal (→ active) of an
// account, and administrative deactivation, each with its `#account` event; takedown and reversal
// of a single record (strongRef, by its URI) or blob (repoBlobRef), which only hides it from reads.
import { method } from '#src/api/method.js'
import { xrpcError } from '#src/errors.js'
import { accountByDid, undeletedAccountByDid } from '#src/account/admin-views.js'
import { activate, deactivate, restore, takedown } from '#src/account/lifecycle.js'
import { blobStatus, recordStatus, setBlobTakedown, setRecordTakedown } from '#src/repo/takedowns.js'

export default method('com.atproto.admin.updateSubjectStatus', ({ db }) => async ({ input }) => {
  const { subject, takedown: td, deactivated } = input.body
  const s = subject as { $type?: string; did?: unknown; uri?: unknown; cid?: unknown }
  if (s.$type === 'com.atproto.repo.strongRef' || s.$type === 'com.atproto.admin.defs#repoBlobRef') {
    if (deactivated) throw xrpcError('InvalidRequest', 'Only accounts are deactivated')
    const isRecord = s.$type === 'com.atproto.repo.strongRef'
    if (td) {
      if (isRecord) await setRecordTakedown(db, s.uri as string, td)
      else await setBlobTakedown(db, s.did as string, s.cid as string, td)
    }
    const after = isRecord ? await recordStatus(db, s.uri as string) : await blobStatus(db, s.did as string, s.cid as string)
    // the subject as sent: Ozone matches the answer against what it asked about
    return { encoding: 'application/json', body: { subject, takedown: after.takedown } }
  }
  const did = s.$type === 'com.atproto.admin.defs#repoRef' ? s.did : undefined
  if (typeof did !== 'string') throw xrpcError('InvalidRequest', 'Unknown subject type')
  await undeletedAccountByDid(db, did)
  if (td) {
    if (td.applied) await takedown(db, did, td.ref ?? null)
    else await restore(db, did)
  }
  if (deactivated) {
    if (deactivated.applied) await deactivate(db, did)
    else await activate(db, did)
  }
  const after = await accountByDid(db, did)
  return {
    encoding: 'application/json',
    body: {
      subject: { $type: 'com.atproto.admin.defs#repoRef', did },
      takedown: { applied: after.status === 'takendown', ...(after.takedown_ref ? { ref: after.takedown_ref } : {}) },
    },
  }
})
