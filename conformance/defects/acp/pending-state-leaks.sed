# Defect (a filter on what the client's driver prints): the client's pending-request table keeps
# an entry after every request has ended, so its summary reports pending 1.
/"type":"summary"/s/"pending":0/"pending":1/
