# Defect (a filter on what the client sends its agent): terminal/output answers without its
# required truncated field.
s/,"truncated":\(true\|false\)//g
s/"truncated":\(true\|false\),//g
