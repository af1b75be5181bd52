// com.atproto.repo.applyWrites: every write in one commit, or none of them.
import { method } from '#src/api/method.js'
import { xrpcError } from '#src/errors.js'
import { prepareDelete, prepareRecordWrite, type PreparedWrite } from '#src/repo/prepare.js'
import { MAX_COMMIT_OPS } from '#src/repo/events.js'
import { ownRepo } from '#src/repo/read.js'
import { writeRecords } from '#src/repo/writer.js'

const CREATE = 'com.atproto.repo.applyWrites#create'
const UPDATE = 'com.atproto.repo.applyWrites#update'
const DELETE = 'com.atproto.repo.applyWrites#delete'

export default method('com.atproto.repo.applyWrites', ({ db }) => async ({ auth, input }) => {
  const { did } = auth.credentials
  const body = input.body
  // one commit, one firehose event: the event's lexicon allows this many operations
  if (body.writes.length > MAX_COMMIT_OPS) {
    throw xrpcError('InvalidRequest', `Too many writes: at most ${MAX_COMMIT_OPS} in one call, not ${body.writes.length}`)
  }
  await ownRepo(db, body.repo, did)
  const prepared: PreparedWrite[] = []
  for (const w of body.writes) {
    if (w.$type === CREATE || w.$type === UPDATE) {
      const ww = w as { collection: string; rkey?: string; value: unknown }
      prepared.push(
        await prepareRecordWrite(did, {
          action: w.$type === CREATE ? 'create' : 'update',
          collection: ww.collection,
          rkey: ww.rkey,
          record: ww.value,
          validate: body.validate,
        }),
      )
    } else if (w.$type === DELETE) {
      prepared.push(prepareDelete(did, { collection: w.collection, rkey: w.rkey }))
    } else {
      throw xrpcError('InvalidRequest', 'Unknown write type')
    }
  }
  // a batch of updates that change nothing commits nothing; it answers with the current commit
  const { commit, current, results } = await writeRecords(db, did, prepared, { swapCommit: body.swapCommit })
  return {
    encoding: 'application/json',
    body: {
      ...(commit ? { commit } : results.length ? { commit: current } : {}),
      results: results.map((r) =>
        r.action === 'delete'
          ? { $type: 'com.atproto.repo.applyWrites#deleteResult' as const }
          : {
              $type: `com.atproto.repo.applyWrites#${r.action}Result` as 'com.atproto.repo.applyWrites#createResult',
              uri: r.uri,
              cid: r.cid,
              ...(r.validationStatus ? { validationStatus: r.validationStatus } : {}),
            },
      ),
    },
  }
})
